// AttendStream buffers are held only for a bounded time (issue 13): an upload
// that stalls ends after --stream_idle_timeout_s, one that is not complete
// after --stream_upload_timeout_s ends too, the drain ends idle uploads at
// once, and the bytes held show in GetStats.
#include <signal.h>

#include <string>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "reliability_util.h"

namespace attn::testing {
namespace {

// A header-only probe is admitted (and then refused for its missing tensors)
// only if its buffers fit the stream budget.
bool ProbeAdmitted(Stub& stub) {
  const grpc::Status status = SendRawStream(stub, {HeaderOf(SmallAttend("probe"))});
  return status.error_code() == grpc::StatusCode::INVALID_ARGUMENT &&
         absl::StrContains(status.error_message(), "ended with 0 of");
}

TEST(StreamLimitsTest, HeldBuffersShowInStatsUntilTheCallEnds) {
  auto server = ServerProcess::Start({"--backend=cpu", "--cpu_threads=1"});
  ASSERT_TRUE(server.ok()) << server.status();
  auto stub = rpb::Attention::NewStub((*server)->NewChannel());
  HeldUpload held(*stub);
  EXPECT_TRUE(Eventually([&] {
    const rpb::ServerStats stats = StatsOf(*stub);
    return stats.stream_buffer_bytes() == kSmallCallBytes &&
           stats.admitted_bytes() == kSmallCallBytes;
  })) << "the held upload's buffers never showed in GetStats";
  held.context->TryCancel();
  EXPECT_FALSE(held.ReadToEnd().ok());
  EXPECT_TRUE(Eventually([&] {
    const rpb::ServerStats stats = StatsOf(*stub);
    return stats.stream_buffer_bytes() == 0 && stats.admitted_bytes() == 0;
  })) << "the cancelled upload's buffers were never released";
}

// The finding: uploads that send only a header held the whole
// budget for as long as they stayed open.
TEST(StreamLimitsTest, IdleUploadEndsAndReleasesItsBuffers) {
  auto server = ServerProcess::Start(
      {"--backend=cpu", "--cpu_threads=1",
       absl::StrCat("--max_stream_buffer_bytes=", kSmallCallBytes), "--stream_idle_timeout_s=0.5"});
  ASSERT_TRUE(server.ok()) << server.status();
  auto stub = rpb::Attention::NewStub((*server)->NewChannel());
  HeldUpload held(*stub);
  const grpc::Status status = held.ReadToEnd();
  EXPECT_EQ(status.error_code(), grpc::StatusCode::DEADLINE_EXCEEDED) << status.error_message();
  EXPECT_TRUE(absl::StrContains(status.error_message(), "--stream_idle_timeout_s"))
      << status.error_message();
  EXPECT_TRUE(absl::StrContains(status.error_message(), "received 0 of 4096 bytes of q") ||
              absl::StrContains(status.error_message(), "no header received"))
      << status.error_message();
  EXPECT_TRUE(Eventually([&] { return StatsOf(*stub).stream_buffer_bytes() == 0; }));
  EXPECT_TRUE(ProbeAdmitted(*stub)) << "the budget was not given back";
  EXPECT_GE(StatsOf(*stub).upload_timeouts(), 1);
}

TEST(StreamLimitsTest, UploadNotCompleteInTimeEnds) {
  auto server = ServerProcess::Start({"--backend=cpu", "--cpu_threads=1",
                                      "--stream_idle_timeout_s=600",
                                      "--stream_upload_timeout_s=0.5"});
  ASSERT_TRUE(server.ok()) << server.status();
  auto stub = rpb::Attention::NewStub((*server)->NewChannel());
  HeldUpload held(*stub);
  const grpc::Status status = held.ReadToEnd();
  EXPECT_EQ(status.error_code(), grpc::StatusCode::DEADLINE_EXCEEDED) << status.error_message();
  EXPECT_TRUE(absl::StrContains(status.error_message(), "--stream_upload_timeout_s"))
      << status.error_message();
}

// An idle upload no longer holds SIGTERM for the whole drain timeout.
TEST(StreamLimitsTest, DrainEndsIdleUploadsAtOnce) {
  ServerProcess::Options options;
  options.flags = {"--backend=cpu", "--cpu_threads=1", "--drain_timeout_s=300",
                   "--drain_upload_idle_s=0"};
  options.stop_timeout = absl::Seconds(60);
  auto server = ServerProcess::Start(options);
  ASSERT_TRUE(server.ok()) << server.status();
  auto stub = rpb::Attention::NewStub((*server)->NewChannel());
  HeldUpload held(*stub);
  ASSERT_TRUE(Eventually([&] { return StatsOf(*stub).stream_buffer_bytes() > 0; }));
  ASSERT_TRUE((*server)->Signal(SIGTERM).ok());
  const grpc::Status status = held.ReadToEnd();
  EXPECT_EQ(status.error_code(), grpc::StatusCode::UNAVAILABLE) << status.error_message();
  EXPECT_TRUE(absl::StrContains(status.error_message(), "--drain_upload_idle_s"))
      << status.error_message();
  // Well before --drain_timeout_s.
  auto exit = (*server)->Wait(absl::Seconds(60));
  ASSERT_TRUE(exit.ok()) << exit.status();
  EXPECT_TRUE(exit->Clean()) << exit->ToString();
}

}  // namespace
}  // namespace attn::testing
