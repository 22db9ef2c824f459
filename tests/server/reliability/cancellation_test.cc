// Cancellation and deadlines stop CPU work between tiles (issue 13: a call
// cancelled at once still held its worker to the end), and the request log
// says who ended each call.
#include <signal.h>

#include <string>

#include "absl/strings/match.h"
#include "absl/synchronization/notification.h"
#include "gtest/gtest.h"
#include "reliability_util.h"

namespace attn::testing {
namespace {

// Self-attention over 131072 keys: about 4.4 TFLOP, minutes on one CPU
// thread, in tasks of 64 query rows (a fraction of a second each).
rpb::AttendRequest LongRequest(const std::string& id) {
  return MakeRequest(MakeRandomInputs({1, 131072, 1, 64}, DType::kBFloat16, FreshSeed()), id);
}

struct AsyncAttend {
  rpb::AttendRequest request;
  rpb::AttendResponse response;
  grpc::ClientContext context;
  grpc::Status status;
  absl::Notification done;

  void Start(Stub& stub) {
    stub.async()->Attend(&context, &request, &response, [this](grpc::Status s) {
      status = std::move(s);
      done.Notify();
    });
  }
};

class CancellationTest : public ::testing::Test {
 protected:
  void SetUp() override {
    log_path_ = TempLogPath("cancel");
    ServerProcess::Options options;
    options.flags = {"--backend=cpu", "--cpu_threads=1", "--cpu_workers=1"};
    options.log_path = log_path_;
    auto server = ServerProcess::Start(options);
    ASSERT_TRUE(server.ok()) << server.status();
    server_ = *std::move(server);
    stub_ = rpb::Attention::NewStub(server_->NewChannel());
  }
  void TearDown() override { std::remove(log_path_.c_str()); }

  // The log line of request `id` (empty until it is written).
  std::string LogLineOf(const std::string& id) {
    return RequestLogLine(ReadWholeFile(log_path_), id);
  }

  std::string log_path_;
  std::unique_ptr<ServerProcess> server_;
  std::unique_ptr<Stub> stub_;
};

TEST_F(CancellationTest, ClientCancelStopsTheRunningKernel) {
  AsyncAttend call;
  call.request = LongRequest("long-cancelled");
  call.Start(*stub_);
  ASSERT_TRUE(Eventually([&] {
    const rpb::ServerStats stats = StatsOf(*stub_);
    return stats.in_flight() == 1 && stats.queued() == 0;
  }, absl::Seconds(120))) << "the long call never started running";
  call.context.TryCancel();
  ASSERT_TRUE(call.done.WaitForNotificationWithTimeout(absl::Seconds(60)));
  EXPECT_EQ(call.status.error_code(), grpc::StatusCode::CANCELLED);
  // The worker is free long before the kernel would have finished.
  EXPECT_TRUE(Eventually([&] { return StatsOf(*stub_).in_flight() == 0; }))
      << "the cancelled call still holds the worker";
  auto context = ContextWithDeadline(absl::Seconds(60));
  rpb::AttendResponse response;
  EXPECT_TRUE(stub_->Attend(context.get(), SmallAttend("after"), &response).ok());
  std::string line;
  ASSERT_TRUE(Eventually([&] { return !(line = LogLineOf("long-cancelled")).empty(); }));
  EXPECT_TRUE(absl::StrContains(line, "status=CANCELLED")) << line;
  EXPECT_TRUE(absl::StrContains(line, "ended_by=client_cancel")) << line;
}

TEST_F(CancellationTest, DeadlineStopsTheRunningKernel) {
  AsyncAttend call;
  call.request = LongRequest("long-deadline");
  call.context.set_deadline(absl::ToChronoTime(absl::Now() + absl::Seconds(5)));
  call.Start(*stub_);
  ASSERT_TRUE(call.done.WaitForNotificationWithTimeout(absl::Seconds(60)));
  EXPECT_EQ(call.status.error_code(), grpc::StatusCode::DEADLINE_EXCEEDED);
  EXPECT_TRUE(Eventually([&] { return StatsOf(*stub_).in_flight() == 0; }))
      << "the expired call still holds the worker";
}

// The drain timeout's cancellations are the server's, not the client's.
TEST_F(CancellationTest, DrainTimeoutIsLoggedAsTheServers) {
  // This fixture's server has the default 30 s drain; start one with 0.
  server_.reset();
  ServerProcess::Options options;
  options.flags = {"--backend=cpu", "--cpu_threads=1", "--cpu_workers=1", "--drain_timeout_s=0"};
  options.log_path = log_path_;
  auto server = ServerProcess::Start(options);
  ASSERT_TRUE(server.ok()) << server.status();
  server_ = *std::move(server);
  stub_ = rpb::Attention::NewStub(server_->NewChannel());
  AsyncAttend call;
  call.request = LongRequest("long-drained");
  call.Start(*stub_);
  ASSERT_TRUE(Eventually([&] {
    const rpb::ServerStats stats = StatsOf(*stub_);
    return stats.in_flight() == 1 && stats.queued() == 0;
  }, absl::Seconds(120))) << "the long call never started running";
  ASSERT_TRUE(server_->Signal(SIGTERM).ok());
  ASSERT_TRUE(call.done.WaitForNotificationWithTimeout(absl::Seconds(60)));
  EXPECT_FALSE(call.status.ok());
  auto exit = server_->Wait(absl::Seconds(60));
  ASSERT_TRUE(exit.ok()) << exit.status();
  EXPECT_TRUE(exit->Clean()) << exit->ToString();
  const std::string line = LogLineOf("long-drained");
  EXPECT_TRUE(absl::StrContains(line, "ended_by=server_drain")) << line;
  EXPECT_FALSE(absl::StrContains(line, "by the client")) << line;
}

}  // namespace
}  // namespace attn::testing
