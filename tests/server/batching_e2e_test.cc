// Request batching end to end (--batch_delay_us): concurrent compatible
// requests run as one stacked launch and each gets its own output back.
// Compiled per backend like e2e_test.cc: "cpu" (label cpu, in CI) and
// "cuda" (label gpu; skips without a CUDA device).
//
// Deterministic: --max_batch_size is the number of requests per shape and
// the delay is long (10 s), so a batch launches when its last request
// arrives, never because a wait ran out; the one worker (one CPU worker, or
// one CUDA stream) takes every batch.
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/notification.h"
#include "absl/time/clock.h"
#include "attn/device.h"
#include "e2e_util.h"
#include "grpcpp/client_context.h"
#include "gtest/gtest.h"
#include "server_process.h"
#include "test_util.h"

#ifndef ATTN_E2E_BACKEND
#error "ATTN_E2E_BACKEND must be \"cpu\" or \"cuda\""
#endif

namespace attn::testing {
namespace {

namespace pb = ::attnserve::v1;

constexpr std::string_view kBackend = ATTN_E2E_BACKEND;
constexpr bool kCuda = kBackend == "cuda";
constexpr int kPerShape = 4;  // requests of each shape, and --max_batch_size

std::vector<std::string> Flags() {
  std::vector<std::string> flags = {"--batch_delay_us=10000000",
                                    absl::StrCat("--max_batch_size=", kPerShape)};
  if (kCuda) {
    flags.insert(flags.end(), {"--backend=cuda", "--devices=0", "--streams_per_device=1"});
  } else {
    flags.insert(flags.end(), {"--backend=cpu", "--cpu_threads=2", "--cpu_workers=1"});
  }
  return flags;
}

// A unary call running in the background.
struct AsyncAttend {
  grpc::ClientContext context;
  pb::AttendRequest request;
  pb::AttendResponse response;
  grpc::Status status;
  absl::Notification done;

  void Start(Stub& stub) {
    context.set_deadline(absl::ToChronoTime(absl::Now() + absl::Seconds(120)));
    stub.async()->Attend(&context, &request, &response, [this](grpc::Status s) {
      status = std::move(s);
      done.Notify();
    });
  }
};

TEST(BatchingE2eTest, ConcurrentCompatibleRequestsShareALaunchAndGetTheirOwnOutputs) {
  if (kCuda && ListCudaDevices().empty()) {
    GTEST_SKIP() << "no CUDA device visible: the cuda backend's batching test needs one";
  }
  auto server = ServerProcess::Start(Flags());
  ASSERT_TRUE(server.ok()) << server.status();
  auto stub = pb::Attention::NewStub((*server)->NewChannel());

  // Two shapes, sent interleaved: "lse" (with the LSE, so its split is
  // checked too) and "causal" (another seq_len and a mask). Batches differ
  // within a shape (1, 2, 3, ...), so each request's slice starts at its
  // own offset; every request has its own random inputs, so a mix-up fails.
  std::vector<ProblemInputs> inputs;
  std::vector<std::unique_ptr<AsyncAttend>> calls;
  for (int i = 0; i < kPerShape; ++i) {
    for (int shape = 0; shape < 2; ++shape) {
      AttentionProblem problem =
          AttentionProblem::SelfAttention(1 + i % 3, shape == 0 ? 128 : 256, 2, 128);
      problem.return_lse = shape == 0;
      problem.causal = shape == 1;
      inputs.push_back(MakeProblemInputs(problem, DType::kBFloat16,
                                         /*seed=*/1000 + static_cast<uint64_t>(inputs.size())));
      auto call = std::make_unique<AsyncAttend>();
      call->request = MakeRequest(inputs.back(), absl::StrCat("r", inputs.size()));
      calls.push_back(std::move(call));
    }
  }
  for (auto& call : calls) call->Start(*stub);
  for (size_t i = 0; i < calls.size(); ++i) {
    ASSERT_TRUE(calls[i]->done.WaitForNotificationWithTimeout(absl::Seconds(150))) << i;
    SCOPED_TRACE(Describe(inputs[i]));
    const pb::AttendResponse& response = calls[i]->response;
    ASSERT_TRUE(calls[i]->status.ok()) << calls[i]->status.error_message();
    EXPECT_TRUE(ProblemOutputMatchesReference(inputs[i], response.out(), response.lse(),
                                              /*tolerance=*/1e-2, /*lse_tolerance=*/1e-3));
    // Each shape's requests filled one batch of their own.
    EXPECT_EQ(response.timing().batch_size(), kPerShape);
    EXPECT_TRUE(TimingConsistent(response.timing()));
  }

  pb::ServerStats stats;
  auto context = ContextWithDeadline(absl::Seconds(10));
  ASSERT_TRUE(stub->GetStats(context.get(), pb::GetStatsRequest(), &stats).ok());
  EXPECT_EQ(stats.batched_launches(), 2);
  EXPECT_EQ(stats.batched_requests(), 2 * kPerShape);
}

// A request with nothing to share a launch with still runs once the delay
// (a short one, on a server of its own) has passed.
TEST(BatchingE2eTest, ALoneRequestRunsAfterTheDelayAndReportsNoBatch) {
  if (kCuda && ListCudaDevices().empty()) {
    GTEST_SKIP() << "no CUDA device visible: the cuda backend's batching test needs one";
  }
  std::vector<std::string> flags = Flags();
  flags.front() = "--batch_delay_us=20000";
  auto server = ServerProcess::Start(flags);
  ASSERT_TRUE(server.ok()) << server.status();
  auto stub = pb::Attention::NewStub((*server)->NewChannel());
  const ProblemInputs in =
      MakeProblemInputs(AttentionProblem::SelfAttention(2, 128, 2, 128), DType::kBFloat16, 7);
  pb::AttendResponse response;
  auto context = ContextWithDeadline(absl::Seconds(120));
  const grpc::Status status = stub->Attend(context.get(), MakeRequest(in, "alone"), &response);
  ASSERT_TRUE(status.ok()) << status.error_message();
  EXPECT_TRUE(ProblemOutputMatchesReference(in, response.out(), response.lse(), 1e-2, 1e-3));
  EXPECT_EQ(response.timing().batch_size(), 0);
  EXPECT_GE(response.timing().queue_ns(), 20'000'000) << "it waited the delay for company";
}

}  // namespace
}  // namespace attn::testing
