// Test-only fault injection end to end (issue 13): attn_server with
// --test_inject_worker_faults makes chosen workers fail the way a GPU with a
// sticky error does (INTERNAL, then the worker retires). The call that meets
// a failing worker gets INTERNAL and no output, never a wrong one; the other
// workers serve every later call correctly and health stays SERVING; when
// no worker is left, health turns NOT_SERVING and calls get UNAVAILABLE.
// Compiled twice like e2e_test.cc: ATTN_E2E_BACKEND "cpu" (label cpu, runs
// in CI) and "cuda" (label gpu; skips with a message without a CUDA device).
#include <cmath>
#include <cstdio>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/notification.h"
#include "absl/time/clock.h"
#include "attn/device.h"
#include "attnserve/v1/attention.grpc.pb.h"
#include "e2e_util.h"
#include "gtest/gtest.h"
#include "http_get.h"
#include "metrics_server.h"
#include "metrics_text.h"
#include "reliability_util.h"
#include "server_process.h"
#include "test_util.h"

#ifndef ATTN_E2E_BACKEND
#error "ATTN_E2E_BACKEND must be \"cpu\" or \"cuda\""
#endif

namespace attn::testing {
namespace {

using grpc::health::v1::HealthCheckResponse;

constexpr std::string_view kBackend = ATTN_E2E_BACKEND;
constexpr bool kCuda = kBackend == "cuda";

// What every injected fault's status says (FaultInjectingExecutor).
constexpr char kInjected[] = "injected device fault on worker ";
// What calls get once no worker is left (Scheduler::Submit).
constexpr char kAllFailed[] = "every worker of this server has failed";

// Relative L2 error allowed against float64, as in e2e_test.cc.
double Tolerance(DType dtype) { return dtype == DType::kBFloat16 ? 1e-2 : 5e-3; }

std::string SkipReason() {
  if (kCuda && ListCudaDevices().empty()) {
    return "no CUDA device visible: the cuda backend's fault injection tests need one";
  }
  return "";
}

// Two workers on either backend (on CUDA: two streams of device 0), the
// faults `spec` names injected.
std::vector<std::string> TwoWorkerFlags(const std::string& spec) {
  std::vector<std::string> flags;
  if (kCuda) {
    flags = {"--backend=cuda", "--devices=0", "--streams_per_device=2"};
  } else {
    flags = {"--backend=cpu", "--cpu_workers=2", "--cpu_threads=1"};
  }
  flags.push_back(absl::StrCat("--test_inject_worker_faults=", spec));
  return flags;
}

// A small request every backend's default kernel takes, and its inputs.
HostInputs SmallInputs(DType dtype) {
  const Shape shape = kCuda ? Shape{1, 128, 2, 128} : Shape{1, 16, 2, 64};
  return MakeRandomInputs(shape, dtype, FreshSeed());
}

double DefaultScale(const HostInputs& in) {
  return 1.0 / std::sqrt(static_cast<double>(in.shape.head_dim));
}

grpc::Status Call(Stub& stub, const rpb::AttendRequest& request, rpb::AttendResponse* response) {
  auto context = ContextWithDeadline(absl::Seconds(120));
  return stub.Attend(context.get(), request, response);
}

// A unary call running in the background.
struct AsyncAttend {
  rpb::AttendRequest request;
  rpb::AttendResponse response;
  grpc::ClientContext context;
  grpc::Status status;
  absl::Notification done;

  void Start(Stub& stub) {
    context.set_deadline(absl::ToChronoTime(absl::Now() + absl::Seconds(600)));
    stub.async()->Attend(&context, &request, &response, [this](grpc::Status s) {
      status = std::move(s);
      done.Notify();
    });
  }
};

// Health of the whole server and of the Attention service, when both agree.
std::optional<HealthCheckResponse::ServingStatus> Health(const ServerProcess& server) {
  auto whole = server.Health();
  auto attention = server.Health("attnserve.v1.Attention");
  if (!whole.ok() || !attention.ok() || *whole != *attention) return std::nullopt;
  return *whole;
}

// With the healthy workers held by calls that run until cancelled, the one
// call left for the failing worker must reach it: no timing decides which
// call meets the fault. CPU only: a CUDA kernel cannot be held running, so
// on the GPU a call would meet the failing worker only by chance.
TEST(WorkerFaultTest, OneFailingWorkerRetiresAndTheOthersServe) {
  if (kCuda) {
    GTEST_SKIP() << "needs calls that hold a worker until cancelled (CPU kernels); the "
                    "all-workers case below runs on the GPU";
  }
  constexpr int kWorkers = 3;
  constexpr int kFailing = 1;
  auto server = StartWithMetrics({absl::StrCat("--cpu_workers=", kWorkers),
                                  absl::StrCat("--test_inject_worker_faults=", kFailing, ":0")});
  ASSERT_TRUE(server.ok()) << server.status();
  ServerProcess& process = *server->process;
  auto stub = rpb::Attention::NewStub(process.NewChannel());

  // One call per worker, each minutes of work on one thread (self-attention
  // over 131072 keys): the healthy workers each hold one, the failing
  // worker takes the third and fails it at once.
  std::vector<std::unique_ptr<AsyncAttend>> calls;
  for (int i = 0; i < kWorkers; ++i) {
    calls.push_back(std::make_unique<AsyncAttend>());
    calls.back()->request =
        MakeRequest(MakeRandomInputs({1, 131072, 1, 64}, DType::kBFloat16, FreshSeed()),
                    absl::StrCat("long", i));
    calls.back()->Start(*stub);
  }
  auto ended = [&]() {
    int n = 0;
    for (const auto& call : calls) n += call->done.HasBeenNotified();
    return n;
  };
  ASSERT_TRUE(Eventually(
      [&] {
        const rpb::ServerStats stats = StatsOf(*stub);
        return ended() == 1 && stats.in_flight() == kWorkers - 1 && stats.queued() == 0;
      },
      absl::Seconds(120)))
      << "expected one call failed and the others running; ended: " << ended();
  std::vector<AsyncAttend*> running;
  for (const auto& call : calls) {
    if (!call->done.HasBeenNotified()) {
      running.push_back(call.get());
      continue;
    }
    EXPECT_EQ(call->status.error_code(), grpc::StatusCode::INTERNAL)
        << call->status.error_message();
    EXPECT_TRUE(absl::StrContains(call->status.error_message(), absl::StrCat(kInjected, kFailing)))
        << call->status.error_message();
    EXPECT_TRUE(call->response.out().empty()) << "a failed call carries no output";
  }
  EXPECT_EQ(Health(process), HealthCheckResponse::SERVING) << "two workers are left";

  // Free the healthy workers: their calls end CANCELLED.
  for (AsyncAttend* call : running) call->context.TryCancel();
  for (AsyncAttend* call : running) {
    ASSERT_TRUE(call->done.WaitForNotificationWithTimeout(absl::Seconds(60)));
    EXPECT_EQ(call->status.error_code(), grpc::StatusCode::CANCELLED)
        << call->status.error_message();
  }
  ASSERT_TRUE(Eventually([&] { return StatsOf(*stub).in_flight() == 0; }));

  // Every later call is served, correctly, by the workers left.
  constexpr int kLaterCalls = 6;
  for (int i = 0; i < kLaterCalls; ++i) {
    const DType dtype = i % 2 == 0 ? DType::kBFloat16 : DType::kFloat16;
    const HostInputs in = SmallInputs(dtype);
    SCOPED_TRACE(Describe(in));
    rpb::AttendResponse response;
    const grpc::Status status = Call(*stub, MakeRequest(in, absl::StrCat("later", i)), &response);
    ASSERT_TRUE(status.ok()) << status.error_message();
    EXPECT_TRUE(OutputMatchesReference(in, DefaultScale(in), response.out(), Tolerance(dtype)));
  }
  EXPECT_EQ(Health(process), HealthCheckResponse::SERVING);

  // GetStats and the metrics show it: the failed and cancelled calls, the
  // retired worker (its executor named as carrying the injected fault). A
  // cancelled call is counted when its kernel stops, which the client does
  // not wait for: poll.
  rpb::ServerStats stats;
  EXPECT_TRUE(Eventually([&] {
    stats = StatsOf(*stub);
    return stats.requests_ok() == kLaterCalls && stats.requests_failed() == kWorkers;
  })) << "want " << kLaterCalls << " ok and " << kWorkers
      << " failed (one INTERNAL, two cancelled): " << stats.ShortDebugString();
  auto metrics = HttpGet(server->metrics_port, "/metrics");
  ASSERT_TRUE(metrics.ok()) << metrics.status();
  const std::string& text = metrics->body;
  EXPECT_EQ(SampleValue(text, R"m(attn_worker_healthy{executor="cpu (1 thread)",worker="0"})m"), 1)
      << text;
  EXPECT_EQ(
      SampleValue(
          text,
          R"m(attn_worker_healthy{executor="cpu (1 thread) [test fault after 0 jobs]",worker="1"})m"),
      0)
      << text;
  EXPECT_EQ(SampleValue(text, R"m(attn_worker_healthy{executor="cpu (1 thread)",worker="2"})m"), 1)
      << text;
  EXPECT_EQ(
      SampleValue(
          text,
          R"m(attn_inference_request_failure_total{code="INTERNAL",kernel="cpu_flash",reason="server",rpc="Attend"})m"),
      1)
      << text;

  auto exit = process.Stop();
  ASSERT_TRUE(exit.ok()) << exit.status();
  EXPECT_TRUE(exit->Clean()) << exit->ToString();
}

// Both workers serve one call, then fail their next: of the first four
// calls exactly two are answered (correctly) and two get INTERNAL, in
// whatever order the workers take them. Health is SERVING after the first
// failure (a worker is left), NOT_SERVING after the second, and calls then
// get UNAVAILABLE. Deterministic: a call only ever reaches a live worker.
TEST(WorkerFaultTest, HealthTurnsNotServingOnlyWhenEveryWorkerHasFailed) {
  if (const std::string skip = SkipReason(); !skip.empty()) GTEST_SKIP() << skip;
  ServerProcess::Options options;
  options.flags = TwoWorkerFlags("0:1,1:1");
  options.log_path = TempLogPath("worker_fault");
  auto server = ServerProcess::Start(options);
  ASSERT_TRUE(server.ok()) << server.status();
  ServerProcess& process = **server;
  auto stub = rpb::Attention::NewStub(process.NewChannel());

  int answered = 0, failed = 0;
  for (int i = 0; i < 4; ++i) {
    const DType dtype = i % 2 == 0 ? DType::kBFloat16 : DType::kFloat16;
    const HostInputs in = SmallInputs(dtype);
    SCOPED_TRACE(absl::StrCat("call ", i, ": ", Describe(in)));
    rpb::AttendResponse response;
    const grpc::Status status = Call(*stub, MakeRequest(in, absl::StrCat("call", i)), &response);
    if (status.ok()) {
      ++answered;
      EXPECT_TRUE(OutputMatchesReference(in, DefaultScale(in), response.out(), Tolerance(dtype)));
      continue;
    }
    ++failed;
    EXPECT_EQ(status.error_code(), grpc::StatusCode::INTERNAL) << status.error_message();
    EXPECT_TRUE(absl::StrContains(status.error_message(), kInjected)) << status.error_message();
    EXPECT_TRUE(response.out().empty()) << "a failed call carries no output";
    if (failed == 1) {
      EXPECT_EQ(Health(process), HealthCheckResponse::SERVING) << "one worker is left";
    }
  }
  EXPECT_EQ(answered, 2);
  EXPECT_EQ(failed, 2);

  // The all-failed callback runs on the last worker just after it answered.
  EXPECT_TRUE(Eventually([&] { return Health(process) == HealthCheckResponse::NOT_SERVING; }))
      << "health never turned NOT_SERVING after every worker failed";
  rpb::AttendResponse response;
  const grpc::Status refused =
      Call(*stub, MakeRequest(SmallInputs(DType::kBFloat16), "after"), &response);
  EXPECT_EQ(refused.error_code(), grpc::StatusCode::UNAVAILABLE) << refused.error_message();
  EXPECT_TRUE(absl::StrContains(refused.error_message(), kAllFailed)) << refused.error_message();

  auto exit = process.Stop();
  ASSERT_TRUE(exit.ok()) << exit.status();
  EXPECT_TRUE(exit->Clean()) << exit->ToString();
  // Said loudly at start, and each retirement logged.
  const std::string log = ReadWholeFile(options.log_path);
  EXPECT_TRUE(absl::StrContains(log,
                                "--test_inject_worker_faults=0:1,1:1: TEST-ONLY FAULT "
                                "INJECTION IS ON"))
      << log;
  EXPECT_TRUE(absl::StrContains(log, "retiring the worker of")) << log;
  std::remove(options.log_path.c_str());
}

// Issue 15, on a host with two GPUs (skipped elsewhere, CI included): the
// worker of cuda:1 fails its first job. Of calls sent eight at a time, the
// ones it takes get INTERNAL (one, as it retires); every other call is
// answered correctly by cuda:0, health stays SERVING, and once it has
// retired every call is served by cuda:0. Which calls cuda:1 takes is
// timing, but with eight waiting and both workers idle it takes one of the
// first batch unless cuda:0 runs all eight before its thread wakes.
TEST(WorkerFaultTest, OneGpuFailingLeavesTheOtherServing) {
  if (!kCuda) GTEST_SKIP() << "a CUDA test (two devices)";
  if (ListCudaDevices().size() < 2) {
    GTEST_SKIP() << "needs two CUDA devices; " << ListCudaDevices().size() << " visible";
  }
  ServerProcess::Options options;
  options.flags = {"--backend=cuda", "--devices=0,1", "--streams_per_device=1",
                   "--test_inject_worker_faults=1:0"};
  options.log_path = TempLogPath("two_gpu_fault");
  auto server = ServerProcess::Start(options);
  ASSERT_TRUE(server.ok()) << server.status();
  ServerProcess& process = **server;
  auto stub = rpb::Attention::NewStub(process.NewChannel());

  int failed = 0;
  for (int round = 0; round < 4; ++round) {
    std::vector<HostInputs> inputs;
    std::vector<std::unique_ptr<AsyncAttend>> calls;
    for (int i = 0; i < 8; ++i) {
      const DType dtype = i % 2 == 0 ? DType::kBFloat16 : DType::kFloat16;
      inputs.push_back(SmallInputs(dtype));
      calls.push_back(std::make_unique<AsyncAttend>());
      calls.back()->request = MakeRequest(inputs.back(), absl::StrCat("r", round, "c", i));
    }
    for (auto& call : calls) call->Start(*stub);
    for (size_t i = 0; i < calls.size(); ++i) {
      AsyncAttend& call = *calls[i];
      ASSERT_TRUE(call.done.WaitForNotificationWithTimeout(absl::Seconds(120)));
      SCOPED_TRACE(absl::StrCat("round ", round, ", call ", i, ": ", Describe(inputs[i])));
      if (!call.status.ok()) {
        ++failed;
        EXPECT_EQ(call.status.error_code(), grpc::StatusCode::INTERNAL)
            << call.status.error_message();
        EXPECT_TRUE(absl::StrContains(call.status.error_message(), absl::StrCat(kInjected, 1)))
            << call.status.error_message();
        EXPECT_TRUE(call.response.out().empty()) << "a failed call carries no output";
        continue;
      }
      EXPECT_TRUE(OutputMatchesReference(inputs[i], DefaultScale(inputs[i]),
                                         call.response.out(), Tolerance(inputs[i].dtype)));
      if (round > 0) {
        EXPECT_TRUE(absl::StrContains(call.response.device(), "cuda:0"))
            << "served by " << call.response.device() << " after cuda:1 retired";
      }
    }
    if (round == 0) {
      ASSERT_EQ(failed, 1) << "cuda:1's worker took none of the first eight calls, or "
                              "failed more than one";
    }
    EXPECT_EQ(Health(process), HealthCheckResponse::SERVING) << "cuda:0 is left";
  }
  EXPECT_EQ(failed, 1);

  auto exit = process.Stop();
  ASSERT_TRUE(exit.ok()) << exit.status();
  EXPECT_TRUE(exit->Clean()) << exit->ToString();
  const std::string log = ReadWholeFile(options.log_path);
  EXPECT_TRUE(absl::StrContains(log, "retiring the worker of")) << log;
  std::remove(options.log_path.c_str());
}

// A malformed spec is a usage error (exit 2), a worker the server does not
// have fails start (exit 1); both name the flag.
TEST(WorkerFaultTest, BadSpecsAreRefusedNamingTheFlag) {
  if (const std::string skip = SkipReason(); !skip.empty()) GTEST_SKIP() << skip;
  const struct {
    std::string spec, exit, message;
  } cases[] = {
      {"1", "exit code 2", "--test_inject_worker_faults: '1' is not WORKER:GOOD_JOBS"},
      {"0:0,0:1", "exit code 2", "--test_inject_worker_faults names worker 0 twice"},
      {"2:0", "exit code 1",
       "--test_inject_worker_faults names worker 2; this server has 2 worker(s)"},
  };
  for (const auto& c : cases) {
    SCOPED_TRACE(c.spec);
    ServerProcess::Options options;
    options.flags = TwoWorkerFlags(c.spec);
    options.log_path = TempLogPath("bad_fault_spec");
    auto server = ServerProcess::Start(options);
    ASSERT_FALSE(server.ok()) << "started with --test_inject_worker_faults=" << c.spec;
    EXPECT_EQ(server.status().code(), absl::StatusCode::kAborted) << server.status();
    EXPECT_TRUE(absl::StrContains(server.status().message(), c.exit)) << server.status();
    const std::string log = ReadWholeFile(options.log_path);
    EXPECT_TRUE(absl::StrContains(log, c.message)) << log;
    std::remove(options.log_path.c_str());
  }
}

}  // namespace
}  // namespace attn::testing
