// GET /metrics on a running attn_server (CPU backend): the text exposition
// with the documented names, success and failure counts and a duration
// histogram whose count matches the calls sent, the gauges; and the flags'
// errors (a port out of range, a port already taken) naming the flag.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <string>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/time/clock.h"
#include "attn/attention.h"
#include "attnserve/v1/attention.grpc.pb.h"
#include "e2e_util.h"
#include "gtest/gtest.h"
#include "http_get.h"
#include "metrics_server.h"
#include "metrics_text.h"
#include "test_util.h"

namespace attn::testing {
namespace {

namespace rpb = ::attnserve::v1;

constexpr int kCalls = 3;

rpb::AttendRequest Small(const std::string& id, const std::string& kernel = "") {
  return MakeRequest(MakeRandomInputs({1, 16, 2, 64}, DType::kBFloat16, FreshSeed()), id, kernel);
}

std::string ReadFile(const std::string& path) {
  std::ifstream file(path);
  std::stringstream text;
  text << file.rdbuf();
  return text.str();
}

std::string TempPath(const std::string& name) {
  const char* dir = std::getenv("TMPDIR");
  return absl::StrCat(dir != nullptr && *dir != '\0' ? dir : "/tmp", "/attn_metrics_", name, "_",
                      FreshSeed(), ".log");
}

TEST(MetricsEndpointTest, ServesCountsHistogramsAndGauges) {
  auto server = StartWithMetrics();
  ASSERT_TRUE(server.ok()) << server.status();
  const int port = server->metrics_port;

  // Before any call: the gauges, and no sample of a call yet (prometheus-cpp
  // leaves out a family until it has one).
  auto before = HttpGet(port, "/metrics");
  ASSERT_TRUE(before.ok()) << before.status();
  EXPECT_EQ(before->status, 200);
  EXPECT_EQ(SampleValue(before->body, "attn_inference_pending_requests"), 0) << before->body;
  EXPECT_EQ(SampleValue(before->body,
                        R"(attn_inference_request_duration_seconds_count{kernel="cpu_flash"})"),
            std::nullopt);

  auto stub = rpb::Attention::NewStub(server->process->NewChannel());
  for (int i = 0; i < kCalls; ++i) {
    auto context = ContextWithDeadline(absl::Seconds(60));
    rpb::AttendResponse response;
    const grpc::Status status = stub->Attend(context.get(), Small(absl::StrCat("m", i)), &response);
    ASSERT_TRUE(status.ok()) << status.error_message();
  }
  {
    auto context = ContextWithDeadline(absl::Seconds(60));
    rpb::AttendResponse response;
    const grpc::Status status =
        stub->Attend(context.get(), Small("bad", "no_such_kernel"), &response);
    ASSERT_EQ(status.error_code(), grpc::StatusCode::NOT_FOUND) << status.error_message();
  }

  // RecordOutcome runs before the response is sent, so the counts are final.
  auto after = HttpGet(port, "/metrics");
  ASSERT_TRUE(after.ok()) << after.status();
  ASSERT_EQ(after->status, 200);
  const std::string& text = after->body;
  SCOPED_TRACE(text);
  EXPECT_TRUE(absl::StrContains(text, "# TYPE attn_inference_request_duration_seconds histogram"));
  EXPECT_EQ(
      SampleValue(text,
                  R"(attn_inference_request_success_total{kernel="cpu_flash",rpc="Attend"})"),
      kCalls);
  EXPECT_EQ(
      SampleValue(text, R"(attn_inference_request_duration_seconds_count{kernel="cpu_flash"})"),
      kCalls);
  EXPECT_EQ(
      SampleValue(
          text,
          R"(attn_inference_request_duration_seconds_bucket{kernel="cpu_flash",le="+Inf"})"),
      kCalls);
  EXPECT_GT(
      *SampleValue(text, R"(attn_inference_request_duration_seconds_sum{kernel="cpu_flash"})"),
      0);
  EXPECT_EQ(
      SampleValue(text, R"(attn_inference_queue_duration_seconds_count{kernel="cpu_flash"})"),
      kCalls);
  EXPECT_EQ(
      SampleValue(text,
                  R"(attn_inference_compute_infer_duration_seconds_count{kernel="cpu_flash"})"),
      kCalls);
  EXPECT_EQ(
      SampleValue(
          text,
          R"(attn_inference_request_failure_total{code="NOT_FOUND",kernel="none",reason="request",rpc="Attend"})"),
      1);
  // 1x16x2x64 bf16: 4096 bytes each of q, k, v and out.
  EXPECT_EQ(SampleValue(text, "attn_inference_input_bytes_total"), kCalls * 3 * 4096);
  EXPECT_EQ(SampleValue(text, "attn_inference_output_bytes_total"), kCalls * 4096);
  EXPECT_EQ(SampleValue(text, "attn_inference_pending_requests"), 0);
  EXPECT_EQ(SampleValue(text, "attn_inference_in_flight_requests"), 0);
  EXPECT_EQ(SampleValue(text, "attn_stream_buffer_bytes"), 0);
  EXPECT_GT(*SampleValue(text, "attn_stream_buffer_limit_bytes"), 0);
  EXPECT_EQ(SampleValue(text, R"m(attn_worker_healthy{executor="cpu (1 thread)",worker="0"})m"), 1);
  EXPECT_EQ(SampleValue(text, "attn_pinned_heap_bytes"), 0) << "off on the cpu backend by default";
  EXPECT_EQ(SampleValue(text, "attn_pinned_heap_overflows_total"), 0);

  // Only /metrics is served.
  auto other = HttpGet(port, "/");
  ASSERT_TRUE(other.ok()) << other.status();
  EXPECT_EQ(other->status, 404);
  auto exit = server->process->Stop();
  ASSERT_TRUE(exit.ok()) << exit.status();
  EXPECT_TRUE(exit->Clean()) << exit->ToString();
}

#ifdef ATTN_SERVER_HAS_PINNED_HEAP
// The pinned heap armed on the CPU backend with an arena too small for one
// request: the call still succeeds (the rest of its buffers are glibc's),
// and the metrics show the arena and count the overflows.
TEST(MetricsEndpointTest, PinnedHeapArenaAndOverflowsAreExposed) {
  constexpr int64_t kArena = int64_t{2} << 20;  // the smallest arena (2 MiB granules)
  auto server = StartWithMetrics({absl::StrCat("--pinned_heap_bytes=", kArena)});
  ASSERT_TRUE(server.ok()) << server.status();
  auto before = HttpGet(server->metrics_port, "/metrics");
  ASSERT_TRUE(before.ok()) << before.status();
  EXPECT_EQ(SampleValue(before->body, "attn_pinned_heap_bytes"), kArena) << before->body;

  // 1 MiB each of q, k and v: more than the arena holds.
  auto stub = rpb::Attention::NewStub(server->process->NewChannel());
  auto context = ContextWithDeadline(absl::Seconds(120));
  rpb::AttendResponse response;
  const grpc::Status status = stub->Attend(
      context.get(),
      MakeRequest(MakeRandomInputs({1, 128, 16, 256}, DType::kBFloat16, FreshSeed()), "big"),
      &response);
  ASSERT_TRUE(status.ok()) << status.error_message();

  auto after = HttpGet(server->metrics_port, "/metrics");
  ASSERT_TRUE(after.ok()) << after.status();
  const std::string& text = after->body;
  SCOPED_TRACE(text);
  EXPECT_EQ(SampleValue(text, "attn_pinned_heap_bytes"), kArena);
  EXPECT_GT(*SampleValue(text, "attn_pinned_heap_overflows_total"), 0);
  const std::optional<double> used = SampleValue(text, "attn_pinned_heap_used_bytes");
  ASSERT_TRUE(used.has_value());
  EXPECT_LE(*used, kArena);
  auto exit = server->process->Stop();
  ASSERT_TRUE(exit.ok()) << exit.status();
  EXPECT_TRUE(exit->Clean()) << exit->ToString();
}
#endif

// `promtool check metrics` (Debian's prometheus package) on `text`: its
// exit status 0 and nothing printed, or what it said.
absl::Status Promtool(const std::string& text) {
  const char* binary = std::getenv("ATTN_PROMTOOL_BINARY");
  const std::string promtool = binary != nullptr && *binary != '\0' ? binary : "/usr/bin/promtool";
  const std::string input = TempPath("promtool_in"), output = TempPath("promtool_out");
  std::ofstream(input) << text;
  const int status = std::system(
      absl::StrCat(promtool, " check metrics <", input, " >", output, " 2>&1").c_str());
  const std::string said = ReadFile(output);
  std::remove(input.c_str());
  std::remove(output.c_str());
  if (status == 0 && said.empty()) return absl::OkStatus();
  return absl::InternalError(absl::StrCat(promtool, " check metrics (status ", status, "): ", said));
}

// The failure counter's samples with `code` and `reason`, over every rpc
// and kernel label.
double FailuresWith(const std::string& text, const std::string& code, const std::string& reason) {
  double sum = 0;
  for (absl::string_view line : absl::StrSplit(text, '\n')) {
    if (!absl::StartsWith(line, "attn_inference_request_failure_total{") ||
        !absl::StrContains(line, absl::StrCat("code=\"", code, "\"")) ||
        !absl::StrContains(line, absl::StrCat("reason=\"", reason, "\""))) {
      continue;
    }
    double value = 0;
    if (absl::SimpleAtod(line.substr(line.rfind(' ') + 1), &value)) sum += value;
  }
  return sum;
}

// A call whose deadline passes while the server computes it: the client
// sees DEADLINE_EXCEEDED, and so do the metrics; and the exposition, with
// successes, failures and histograms in it, passes promtool's lint.
TEST(MetricsEndpointTest, AMissedDeadlineIsCountedAsTheClientSawItAndPromtoolPasses) {
  auto server = StartWithMetrics();
  ASSERT_TRUE(server.ok()) << server.status();
  auto stub = rpb::Attention::NewStub(server->process->NewChannel());
  {
    auto context = ContextWithDeadline(absl::Seconds(60));
    rpb::AttendResponse response;
    ASSERT_TRUE(stub->Attend(context.get(), Small("ok"), &response).ok());
    context = ContextWithDeadline(absl::Seconds(60));
    ASSERT_EQ(stub->Attend(context.get(), Small("bad", "no_such_kernel"), &response).error_code(),
              grpc::StatusCode::NOT_FOUND);
  }
  {
    // 69 GFLOP on one CPU thread of cpu_reference: ten seconds or more
    // (cpu_flash would finish inside the deadline); 4 MiB a tensor,
    // which arrives well within the deadline (a call ended before it had
    // arrived is counted the same, but one ended before it reached the
    // server is not counted at all: the request is built first).
    rpb::AttendRequest late =
        MakeRequest(MakeRandomInputs({1, 8192, 4, 64}, DType::kBFloat16, FreshSeed()), "late");
    late.set_kernel(kCpuKernelName);
    auto context = ContextWithDeadline(absl::Seconds(2));
    rpb::AttendResponse response;
    const grpc::Status status = stub->Attend(context.get(), late, &response);
    ASSERT_EQ(status.error_code(), grpc::StatusCode::DEADLINE_EXCEEDED) << status.error_message();
  }
  // The server records the call once its work has stopped (between tiles).
  std::string text;
  const absl::Time give_up = absl::Now() + absl::Seconds(120);
  while (absl::Now() < give_up) {
    auto scraped = HttpGet(server->metrics_port, "/metrics");
    ASSERT_TRUE(scraped.ok()) << scraped.status();
    text = scraped->body;
    if (FailuresWith(text, "DEADLINE_EXCEEDED", "client_deadline") +
            FailuresWith(text, "CANCELLED", "client_deadline") >
        0) {
      break;
    }
    absl::SleepFor(absl::Milliseconds(100));
  }
  SCOPED_TRACE(text);
  EXPECT_EQ(FailuresWith(text, "DEADLINE_EXCEEDED", "client_deadline"), 1);
  EXPECT_EQ(FailuresWith(text, "CANCELLED", "client_deadline"), 0);
  const absl::Status lint = Promtool(text);
  EXPECT_TRUE(lint.ok()) << lint;
  auto exit = server->process->Stop();
  ASSERT_TRUE(exit.ok()) << exit.status();
  EXPECT_TRUE(exit->Clean()) << exit->ToString();
}

TEST(MetricsEndpointTest, BadMetricsPortIsAUsageError) {
  ServerProcess::Options options;
  options.flags = {"--backend=cpu", "--metrics_port=70000"};
  options.log_path = TempPath("bad_port");
  auto server = ServerProcess::Start(options);
  ASSERT_FALSE(server.ok());
  EXPECT_EQ(server.status().code(), absl::StatusCode::kAborted) << server.status();
  EXPECT_TRUE(absl::StrContains(server.status().message(), "exit code 2")) << server.status();
  const std::string log = ReadFile(options.log_path);
  EXPECT_TRUE(absl::StrContains(log, "--metrics_port is 70000; it must be between 0 and 65535"))
      << log;
  std::remove(options.log_path.c_str());
}

TEST(MetricsEndpointTest, TakenMetricsPortFailsStartNamingTheFlag) {
  // A listener of the test's own holds the port.
  const int holder = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  ASSERT_GE(holder, 0);
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t length = sizeof(address);
  ASSERT_EQ(bind(holder, reinterpret_cast<sockaddr*>(&address), sizeof(address)), 0);
  ASSERT_EQ(listen(holder, 1), 0);
  ASSERT_EQ(getsockname(holder, reinterpret_cast<sockaddr*>(&address), &length), 0);
  const int port = ntohs(address.sin_port);

  ServerProcess::Options options;
  options.flags = {"--backend=cpu", absl::StrCat("--metrics_port=", port)};
  options.log_path = TempPath("taken_port");
  auto server = ServerProcess::Start(options);
  close(holder);
  ASSERT_FALSE(server.ok());
  EXPECT_TRUE(absl::StrContains(server.status().message(), "exit code 1")) << server.status();
  const std::string log = ReadFile(options.log_path);
  EXPECT_TRUE(absl::StrContains(log, absl::StrCat("cannot serve metrics on 127.0.0.1:", port,
                                                  " (--metrics_address, --metrics_port)")))
      << log;
  std::remove(options.log_path.c_str());
}

}  // namespace
}  // namespace attn::testing
