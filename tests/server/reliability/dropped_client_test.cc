// A client process that dies mid-call (issue 13: only a cancel was tested,
// not a client gone with its connection): the server releases what the call
// held, keeps serving, and logs who ended it. The client is
// attn_test_dropping_client (dropping_client.cc), killed with SIGKILL.
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>

#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "gtest/gtest.h"
#include "reliability_util.h"

#ifndef ATTN_DROPPING_CLIENT
#error "ATTN_DROPPING_CLIENT must name the attn_test_dropping_client binary (set by CMake)"
#endif

extern char** environ;

namespace attn::testing {
namespace {

class DroppedClientTest : public ::testing::Test {
 protected:
  void SetUp() override {
    log_path_ = TempLogPath("dropped");
    ServerProcess::Options options;
    // Upload limits far beyond the test's bounds: only the client's death
    // can end the upload in time.
    options.flags = {"--backend=cpu", "--cpu_threads=1", "--cpu_workers=1",
                     "--stream_idle_timeout_s=600", "--stream_upload_timeout_s=600"};
    options.log_path = log_path_;
    auto server = ServerProcess::Start(options);
    ASSERT_TRUE(server.ok()) << server.status();
    server_ = *std::move(server);
    stub_ = rpb::Attention::NewStub(server_->NewChannel());
  }
  void TearDown() override {
    if (client_ > 0) KillClient();
    std::remove(log_path_.c_str());
  }

  // Starts attn_test_dropping_client in `mode` with request id `id`.
  void StartClient(const std::string& mode, const std::string& id) {
    std::vector<std::string> args = {ATTN_DROPPING_CLIENT, server_->address(), mode, id};
    std::vector<char*> argv;
    for (std::string& arg : args) argv.push_back(arg.data());
    argv.push_back(nullptr);
    ASSERT_EQ(posix_spawn(&client_, argv[0], nullptr, nullptr, argv.data(), environ), 0);
  }

  // SIGKILL, and the exit reaped: the client and its connection are gone.
  void KillClient() {
    ASSERT_EQ(kill(client_, SIGKILL), 0);
    int status = 0;
    ASSERT_EQ(waitpid(client_, &status, 0), client_);
    EXPECT_TRUE(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL)
        << "the client ended by itself before it was killed";
    client_ = -1;
  }

  // Nothing held, in flight or queued: the call's bytes are back.
  bool NothingHeld() {
    const rpb::ServerStats stats = StatsOf(*stub_);
    return stats.in_flight() == 0 && stats.queued() == 0 && stats.admitted_bytes() == 0 &&
           stats.stream_buffer_bytes() == 0;
  }

  // A normal call is answered, and correctly.
  void ExpectServing() {
    const HostInputs inputs = MakeRandomInputs({1, 16, 2, 64}, DType::kBFloat16, FreshSeed());
    rpb::AttendResponse response;
    auto context = ContextWithDeadline(absl::Seconds(60));
    const grpc::Status status = stub_->Attend(context.get(), MakeRequest(inputs, "next"), &response);
    ASSERT_TRUE(status.ok()) << status.error_message();
    EXPECT_TRUE(MatchesReference(inputs, response.out()));
  }

  // The log line of call `id`, once written.
  std::string LogLineOf(const std::string& id) {
    std::string line;
    Eventually([&] { return !(line = RequestLogLine(ReadWholeFile(log_path_), id)).empty(); });
    return line;
  }

  std::string log_path_;
  std::unique_ptr<ServerProcess> server_;
  std::unique_ptr<Stub> stub_;
  pid_t client_ = -1;
};

TEST_F(DroppedClientTest, ClientKilledWhileItsCallRunsReleasesTheCall) {
  StartClient("unary", "dropped-unary");
  ASSERT_TRUE(Eventually([&] {
    const rpb::ServerStats stats = StatsOf(*stub_);
    return stats.in_flight() == 1 && stats.queued() == 0 && stats.admitted_bytes() > 0;
  }, absl::Seconds(120))) << "the client's call never started running";
  KillClient();
  // Long before the kernel would have finished (minutes).
  EXPECT_TRUE(Eventually([&] { return NothingHeld(); }))
      << "the dead client's call still holds the worker or its bytes";
  ExpectServing();
  const std::string line = LogLineOf("dropped-unary");
  EXPECT_TRUE(absl::StrContains(line, "status=CANCELLED")) << line;
  EXPECT_TRUE(absl::StrContains(line, "ended_by=client_cancel")) << line;
}

TEST_F(DroppedClientTest, ClientKilledMidUploadReleasesItsBuffers) {
  StartClient("stream", "dropped-stream");
  ASSERT_TRUE(Eventually([&] { return StatsOf(*stub_).stream_buffer_bytes() > 0; },
                         absl::Seconds(120)))
      << "the client's upload never started";
  KillClient();
  EXPECT_TRUE(Eventually([&] { return NothingHeld(); }))
      << "the dead client's upload still holds its buffers";
  ExpectServing();
  const std::string line = LogLineOf("dropped-stream");
  EXPECT_TRUE(absl::StrContains(line, "status=CANCELLED")) << line;
  EXPECT_TRUE(absl::StrContains(line, "ended_by=client_cancel")) << line;
}

}  // namespace
}  // namespace attn::testing
