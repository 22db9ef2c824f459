// Unit tests of admission: CallGate (calls in progress, closed while
// draining) and Admission (the byte budgets, callers' shares, streams'
// windows; scheduling/admission.h).
#include <atomic>
#include <thread>
#include <vector>

#include "absl/time/clock.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "scheduling/admission.h"
#include "frontend/call_gate.h"
#include "gtest/gtest.h"

namespace attn::server {
namespace {

TEST(CallGateTest, CountsCallsAndRefusesOnceClosed) {
  CallGate gate;
  EXPECT_TRUE(gate.WaitIdle(absl::ZeroDuration()));
  ASSERT_TRUE(gate.Enter());
  ASSERT_TRUE(gate.Enter());
  EXPECT_EQ(gate.active(), 2);
  gate.Close();
  EXPECT_FALSE(gate.Enter()) << "a closed gate admits nothing";
  EXPECT_FALSE(gate.WaitIdle(absl::Milliseconds(20))) << "two calls are still inside";
  gate.Leave();
  std::thread last([&gate]() {
    absl::SleepFor(absl::Milliseconds(20));
    gate.Leave();
  });
  EXPECT_TRUE(gate.WaitIdle(absl::Seconds(30)));
  EXPECT_EQ(gate.active(), 0);
  last.join();
}

AdmissionLimits Limits(int64_t admitted, int64_t stream, double share = 1.0,
                       int64_t window = 1 << 20) {
  return AdmissionLimits{admitted, stream, share, window};
}

TEST(AdmissionTest, ReservesUpToTheLimitAndNoFurther) {
  Admission admission(Limits(100, 100));
  absl::StatusOr<AdmissionTicket> a = admission.AdmitCall("p1", 60, "Attend", "60 bytes");
  ASSERT_TRUE(a.ok()) << a.status();
  absl::StatusOr<AdmissionTicket> refused = admission.AdmitCall("p2", 41, "Attend", "41 bytes");
  EXPECT_EQ(refused.status().code(), absl::StatusCode::kResourceExhausted);
  EXPECT_TRUE(absl::StrContains(refused.status().message(), "--max_admitted_bytes"))
      << refused.status();
  EXPECT_TRUE(absl::StrContains(refused.status().message(), "60 of 100")) << refused.status();
  EXPECT_EQ(admission.admitted_used(), 60) << "a refused reservation takes nothing";
  absl::StatusOr<AdmissionTicket> b = admission.AdmitCall("p2", 40, "Attend", "40 bytes");
  ASSERT_TRUE(b.ok()) << b.status();
  EXPECT_FALSE(admission.AdmitCall("p3", 1, "Attend", "1 byte").ok());
  a->Release();
  EXPECT_EQ(a->admitted_bytes(), 0);
  {
    absl::StatusOr<AdmissionTicket> c = admission.AdmitCall("p3", 60, "Attend", "60 bytes");
    ASSERT_TRUE(c.ok()) << c.status();
    EXPECT_EQ(admission.admitted_used(), 100);
  }
  EXPECT_EQ(admission.admitted_used(), 40) << "a destroyed ticket gives its bytes back";
  AdmissionTicket moved = *std::move(b);
  EXPECT_EQ(moved.admitted_bytes(), 40);
  moved = AdmissionTicket();
  EXPECT_EQ(admission.admitted_used(), 0) << "a ticket replaced by another gives its bytes back";
}

TEST(AdmissionTest, ConcurrentReservationsNeverExceedTheLimit) {
  Admission admission(Limits(1000, 1000));
  std::vector<std::thread> threads;
  std::atomic<int> granted{0};
  for (int t = 0; t < 8; ++t) {
    threads.emplace_back([&, t]() {
      for (int i = 0; i < 1000; ++i) {
        absl::StatusOr<AdmissionTicket> ticket =
            admission.AdmitCall(absl::StrCat("peer", t), 7, "Attend", "7 bytes");
        if (ticket.ok()) {
          granted.fetch_add(1);
          EXPECT_LE(admission.admitted_used(), 1000);
        }
      }
    });
  }
  for (std::thread& thread : threads) thread.join();
  EXPECT_EQ(admission.admitted_used(), 0);
  EXPECT_GT(granted.load(), 0);
}

// One caller's many calls cannot hold more than its share; its first is
// admitted whenever it fits, and other callers still get in.
TEST(AdmissionTest, OneCallerHoldsAtMostItsShareOverSeveralCalls) {
  Admission admission(Limits(100, 100, /*share=*/0.5));
  absl::StatusOr<AdmissionTicket> big = admission.AdmitCall("a", 70, "Attend", "70 bytes");
  ASSERT_TRUE(big.ok()) << "a caller's first call may exceed its share: " << big.status();
  absl::StatusOr<AdmissionTicket> second = admission.AdmitCall("a", 10, "Attend", "10 bytes");
  EXPECT_EQ(second.status().code(), absl::StatusCode::kResourceExhausted);
  EXPECT_TRUE(absl::StrContains(second.status().message(), "--max_peer_share"))
      << second.status();
  absl::StatusOr<AdmissionTicket> other = admission.AdmitCall("b", 30, "Attend", "30 bytes");
  EXPECT_TRUE(other.ok()) << "another caller gets the rest: " << other.status();
  big->Release();
  std::vector<AdmissionTicket> held;
  for (int i = 0; i < 5; ++i) {
    absl::StatusOr<AdmissionTicket> t = admission.AdmitCall("a", 10, "Attend", "10 bytes");
    ASSERT_TRUE(t.ok()) << i << ": " << t.status();
    held.push_back(*std::move(t));
  }
  EXPECT_FALSE(admission.AdmitCall("a", 10, "Attend", "10 bytes").ok())
      << "a sixth call would give the caller 60 of 100";
  EXPECT_TRUE(admission.AdmitCall("c", 10, "Attend", "10 bytes").ok());
}

// An upload reserves as its bytes arrive: a header alone holds one window,
// not the size it announces.
TEST(AdmissionTest, StreamsReserveAWindowAheadOfWhatArrived) {
  Admission admission(Limits(1010, 1010, 1.0, /*window=*/100));  // room for both calls
  absl::StatusOr<AdmissionTicket> probe =
      admission.AdmitStream("a", 900, 50, "900 bytes of inputs");
  ASSERT_TRUE(probe.ok()) << probe.status();
  EXPECT_EQ(probe->stream_bytes(), 100);
  EXPECT_EQ(probe->admitted_bytes(), 100);
  absl::StatusOr<AdmissionTicket> small =
      admission.AdmitStream("b", 40, 20, "40 bytes of inputs");
  ASSERT_TRUE(small.ok()) << small.status();
  EXPECT_EQ(small->stream_bytes(), 60) << "a call smaller than a window takes all of it";

  AdmissionTicket& t = *probe;
  EXPECT_TRUE(admission.GrowStream(t, 60, 900, "the upload").ok());
  EXPECT_EQ(t.stream_bytes(), 100) << "within the window: nothing more";
  EXPECT_TRUE(admission.GrowStream(t, 150, 900, "the upload").ok());
  EXPECT_EQ(t.stream_bytes(), 250) << "a window ahead of the 150 received";
  EXPECT_TRUE(admission.GrowStream(t, 880, 900, "the upload").ok());
  EXPECT_EQ(t.stream_bytes(), 900) << "never beyond the upload's size";
  EXPECT_TRUE(admission.AdmitStreamOutputs(t, 900, 50, "the outputs").ok());
  EXPECT_EQ(t.stream_bytes(), 950);
  EXPECT_EQ(t.admitted_bytes(), 950);
  EXPECT_TRUE(admission.AdmitStreamOutputs(*small, 40, 20, "the outputs").ok());
  EXPECT_EQ(small->stream_bytes(), 60) << "already held since the header";
  absl::StatusOr<AdmissionTicket> late = admission.AdmitStream("c", 30, 20, "50 bytes");
  EXPECT_EQ(late.status().code(), absl::StatusCode::kResourceExhausted) << late.status();
  EXPECT_TRUE(absl::StrContains(late.status().message(), "--max_admitted_bytes")) << late.status();
  admission.ReleaseStreamInputs(t, 900);
  EXPECT_EQ(t.stream_bytes(), 50) << "the outputs' buffers stay";
  EXPECT_EQ(t.admitted_bytes(), 950) << "admitted bytes stay until the response is sent";
  t.Release();
  small->Release();
  EXPECT_EQ(admission.admitted_used(), 0);
  EXPECT_EQ(admission.stream_used(), 0);
}

}  // namespace
}  // namespace attn::server
