// Admission is fair across callers (scheduling/admission.h): uploads that
// send only a header hold one window, not the size they announce, so a
// stranger's idle streams cannot shut out everyone else; and one caller's
// many calls hold at most --max_peer_share of a budget, so others still get
// in. Both failed before admission followed the bytes that arrive and knew
// callers: four header-only streams of B=4, S=4096 held the whole stream
// budget for their idle timeout.
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "reliability_util.h"

namespace attn::testing {
namespace {

// A header that announces the largest default call: B=4, S=4096, H=16,
// D=128 bf16, 64 MiB per tensor, 256 MiB with the output: a quarter of the
// default stream budget.
rpb::AttendRequest LargeHeader(const std::string& id) {
  rpb::AttendRequest request;
  request.set_request_id(id);
  request.set_dtype(rpb::DTYPE_BFLOAT16);
  request.mutable_shape()->set_batch(4);
  request.mutable_shape()->set_seq_len(4096);
  request.mutable_shape()->set_num_heads(16);
  request.mutable_shape()->set_head_dim(128);
  return request;
}

TEST(FairAdmissionTest, HeaderOnlyUploadsDoNotHoldTheBudgetTheyAnnounce) {
  auto server = ServerProcess::Start({"--backend=cpu", "--cpu_threads=1"});
  ASSERT_TRUE(server.ok()) << server.status();
  auto stranger = rpb::Attention::NewStub((*server)->NewChannel());
  std::vector<std::unique_ptr<HeldUpload>> probes;
  for (int i = 0; i < 4; ++i) {
    probes.push_back(std::make_unique<HeldUpload>(*stranger, LargeHeader(absl::StrCat("p", i))));
  }
  auto other = rpb::Attention::NewStub((*server)->NewChannel());
  // The probes are admitted (their reservations show), each one window.
  ASSERT_TRUE(Eventually([&] { return StatsOf(*other).stream_buffer_bytes() >= 4 * (16 << 20); }))
      << "the probes were never admitted";
  const rpb::ServerStats held = StatsOf(*other);
  EXPECT_LE(held.stream_buffer_bytes(), 4 * (16 << 20)) << "a header holds one window";
  EXPECT_LE(held.admitted_bytes(), 4 * (16 << 20));

  // Another caller's streamed call runs.
  const rpb::AttendRequest request = SmallAttend("other");
  const StreamResult result = AttendViaStream(*other, request, 1024);
  ASSERT_TRUE(result.status.ok()) << result.status.error_message();
  EXPECT_TRUE(result.error.empty()) << result.error;
  for (auto& probe : probes) probe->context->TryCancel();
  for (auto& probe : probes) EXPECT_FALSE(probe->ReadToEnd().ok());
  EXPECT_TRUE(Eventually([&] { return StatsOf(*other).stream_buffer_bytes() == 0; }));
}

TEST(FairAdmissionTest, OneCallersManyCallsLeaveRoomForOthers) {
  // Room for 16 small calls; one caller may hold 8 of them (0.5).
  auto server = ServerProcess::Start(
      {"--backend=cpu", "--cpu_threads=1",
       absl::StrCat("--max_stream_buffer_bytes=", 16 * kSmallCallBytes), "--max_peer_share=0.5"});
  ASSERT_TRUE(server.ok()) << server.status();
  auto greedy = rpb::Attention::NewStub((*server)->NewChannel());
  auto other = rpb::Attention::NewStub((*server)->NewChannel());
  std::vector<std::unique_ptr<HeldUpload>> held;
  for (int i = 0; i < 8; ++i) {
    held.push_back(
        std::make_unique<HeldUpload>(*greedy, SmallAttend(absl::StrCat("held", i))));
  }
  ASSERT_TRUE(Eventually([&] {
    return StatsOf(*other).stream_buffer_bytes() == 8 * kSmallCallBytes;
  })) << "the caller's first eight calls were not all admitted";

  HeldUpload ninth(*greedy, SmallAttend("ninth"));
  const grpc::Status refused = ninth.ReadToEnd();
  EXPECT_EQ(refused.error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED) << refused.error_message();
  EXPECT_TRUE(absl::StrContains(refused.error_message(), "--max_peer_share"))
      << refused.error_message();

  // Another caller gets in while the greedy one holds its share.
  const StreamResult result = AttendViaStream(*other, SmallAttend("other"), 1024);
  ASSERT_TRUE(result.status.ok()) << result.status.error_message();
  for (auto& h : held) h->context->TryCancel();
  for (auto& h : held) EXPECT_FALSE(h->ReadToEnd().ok());
  EXPECT_TRUE(Eventually([&] { return StatsOf(*other).stream_buffer_bytes() == 0; }));
}

}  // namespace
}  // namespace attn::testing
