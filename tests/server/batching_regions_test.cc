// Request batching with tensors in shared-memory regions: requests whose
// inputs or outputs are in system regions (and, on the CUDA backend, in
// CUDA regions) share one stacked launch with inline ones, and each gets
// its right output where it asked for it. The launch plan
// (server/backends/launch_plan.h) copies each job's part to and from its
// place; on CUDA a lone job's CUDA regions are used in place, a stacked
// one's are copied on the device. Compiled per backend like
// batching_e2e_test.cc: "cpu" (label cpu, in CI) and "cuda" (label gpu;
// skips without a CUDA device).
//
// Deterministic: --max_batch_size is the number of requests and the delay
// is long (10 s), so the batch launches when its last request arrives; the
// one worker takes it.
#include <cstring>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/notification.h"
#include "attn/client/attention_client.h"
#include "attn/client/shared_memory.h"
#include "attn/device.h"
#include "e2e_util.h"
#include "grpc/grpc.h"
#include "gtest/gtest.h"
#include "server_process.h"
#include "test_util.h"

#ifndef ATTN_E2E_BACKEND
#error "ATTN_E2E_BACKEND must be \"cpu\" or \"cuda\""
#endif
constexpr std::string_view kBackend = ATTN_E2E_BACKEND;
constexpr bool kCuda = kBackend == "cuda";
#if defined(ATTN_BATCHING_REGIONS_CUDA)
#include <cuda_runtime_api.h>

#include "cuda_test_util.h"
#endif

namespace attn::testing {
namespace {

constexpr int kRequests = 4;  // and --max_batch_size

std::vector<std::string> Flags() {
  std::vector<std::string> flags = {"--batch_delay_us=10000000",
                                    absl::StrCat("--max_batch_size=", kRequests),
                                    "--allow_shared_memory"};
  if (kCuda) {
    flags.insert(flags.end(), {"--backend=cuda", "--devices=0", "--streams_per_device=1"});
  } else {
    flags.insert(flags.end(), {"--backend=cpu", "--cpu_threads=2", "--cpu_workers=1"});
  }
  return flags;
}

std::string ToBytes(const std::vector<uint16_t>& v) {
  return std::string(reinterpret_cast<const char*>(v.data()), v.size() * 2);
}

std::string LseBytes(const std::vector<float>& lse) {
  return std::string(reinterpret_cast<const char*>(lse.data()), lse.size() * sizeof(float));
}

// Where each tensor of one request is: in the message, a system region or
// (CUDA only) a CUDA region.
enum class Where { kMessage, kSystem, kDevice };
struct Placement {
  Where q, k, v, out, lse;
};

// The regions the test's requests use: one of each kind for inputs, one
// for outputs, each tensor at its own 16-byte-aligned offset.
class RegionsArena {
 public:
  static constexpr int64_t kSlot = 1 << 20;  // bytes per tensor slot
  // Slots: q, k, v of each request; O and the LSE of each.
  static constexpr int64_t kInputSlots = 3 * kRequests, kOutputSlots = 2 * kRequests;

  explicit RegionsArena(AttentionClient& client) : client_(client) {}

  // Registers the regions; false (with a test failure) when one fails.
  bool Register() {
    auto in = SharedMemory::Create(kInputSlots * kSlot);
    auto out = SharedMemory::Create(kOutputSlots * kSlot);
    EXPECT_TRUE(in.ok() && out.ok());
    if (!in.ok() || !out.ok()) return false;
    system_in_ = *std::move(in);
    system_out_ = *std::move(out);
    std::memset(system_out_->data(), 0, system_out_->size());
    for (auto [name, shm, id] : {std::tuple{"sys_in", system_in_.get(), &system_in_id_},
                                 std::tuple{"sys_out", system_out_.get(), &system_out_id_}}) {
      auto region = client_.RegisterSystemRegion(name, shm->name(), 0, shm->size());
      EXPECT_TRUE(region.ok()) << region.status();
      if (!region.ok()) return false;
      *id = region->region_id();
    }
#if defined(ATTN_BATCHING_REGIONS_CUDA)
    device_in_ = std::make_unique<DeviceBuffer>(kInputSlots * kSlot);
    device_out_ = std::make_unique<DeviceBuffer>(kOutputSlots * kSlot);
    EXPECT_TRUE(device_in_->get() != nullptr && device_out_->get() != nullptr);
    int device = 0;
    EXPECT_EQ(cudaGetDevice(&device), cudaSuccess);
    for (auto [name, buffer, id, slots] :
         {std::tuple{"dev_in", device_in_.get(), &device_in_id_, kInputSlots},
          std::tuple{"dev_out", device_out_.get(), &device_out_id_, kOutputSlots}}) {
      cudaIpcMemHandle_t handle;
      EXPECT_EQ(cudaIpcGetMemHandle(&handle, buffer->get()), cudaSuccess);
      auto region = client_.RegisterCudaRegion(
          name, std::string(reinterpret_cast<const char*>(&handle), sizeof(handle)), device, 0,
          slots * kSlot);
      EXPECT_TRUE(region.ok()) << region.status();
      if (!region.ok()) return false;
      *id = region->region_id();
    }
#endif
    return true;
  }

  // Puts an input of `bytes` at slot `slot` of the input region of `where`
  // and returns its reference (or sets `inline_bytes` for kMessage).
  TensorRef PlaceInput(Where where, int slot, const std::string& bytes, std::string* inline_bytes) {
    const int64_t at = slot * kSlot;
    switch (where) {
      case Where::kMessage:
        *inline_bytes = bytes;
        return {};
      case Where::kSystem:
        std::memcpy(system_in_->data() + at, bytes.data(), bytes.size());
        return {system_in_id_, at, static_cast<int64_t>(bytes.size())};
      case Where::kDevice:
#if defined(ATTN_BATCHING_REGIONS_CUDA)
        EXPECT_EQ(cudaMemcpy(static_cast<char*>(device_in_->get()) + at, bytes.data(),
                             bytes.size(), cudaMemcpyHostToDevice),
                  cudaSuccess);
        return {device_in_id_, at, static_cast<int64_t>(bytes.size())};
#else
        ADD_FAILURE() << "CUDA regions need the cuda backend";
        return {};
#endif
    }
    return {};
  }

  // The reference of an output of `bytes` at slot `slot` of the output
  // region of `where`; the slot is poisoned (0x55) first.
  TensorRef PlaceOutput(Where where, int slot, int64_t bytes) {
    const int64_t at = slot * kSlot;
    switch (where) {
      case Where::kMessage:
        return {};
      case Where::kSystem:
        std::memset(system_out_->data() + at, 0x55, static_cast<size_t>(bytes));
        return {system_out_id_, at, bytes};
      case Where::kDevice:
#if defined(ATTN_BATCHING_REGIONS_CUDA)
        EXPECT_EQ(cudaMemset(static_cast<char*>(device_out_->get()) + at, 0x55, bytes),
                  cudaSuccess);
        return {device_out_id_, at, bytes};
#else
        return {};
#endif
    }
    return {};
  }

  // The bytes of an output placed by PlaceOutput.
  std::string ReadOutput(Where where, int slot, int64_t bytes) const {
    const int64_t at = slot * kSlot;
    std::string out(static_cast<size_t>(bytes), '\0');
    if (where == Where::kSystem) std::memcpy(out.data(), system_out_->data() + at, bytes);
#if defined(ATTN_BATCHING_REGIONS_CUDA)
    if (where == Where::kDevice) {
      EXPECT_EQ(cudaMemcpy(out.data(), static_cast<char*>(device_out_->get()) + at, bytes,
                           cudaMemcpyDeviceToHost),
                cudaSuccess);
    }
#endif
    return out;
  }

 private:
  AttentionClient& client_;
  std::unique_ptr<SharedMemory> system_in_, system_out_;
  std::string system_in_id_, system_out_id_;
#if defined(ATTN_BATCHING_REGIONS_CUDA)
  std::unique_ptr<DeviceBuffer> device_in_, device_out_;
  std::string device_in_id_, device_out_id_;
#endif
};

TensorPath ExpectedPath(Where where) {
  switch (where) {
    case Where::kMessage:
      return TensorPath::kInline;
    case Where::kSystem:
      return TensorPath::kSystemShm;
    case Where::kDevice:
      return TensorPath::kCudaIpc;
  }
  return TensorPath::kUnspecified;
}

TEST(BatchingRegionsTest, RequestsWithTensorsInRegionsShareALaunchWithInlineOnes) {
  if (kCuda && ListCudaDevices().empty()) {
    GTEST_SKIP() << "no CUDA device visible: the cuda backend's test needs one";
  }
  static const bool kept_up = (grpc_init(), true);
  static_cast<void>(kept_up);
  ServerProcess::Options server_options;
  server_options.flags = Flags();
  server_options.start_timeout = absl::Seconds(120);
  auto server = ServerProcess::Start(server_options);
  ASSERT_TRUE(server.ok()) << server.status();
  ClientOptions client_options;
  client_options.address = (*server)->address();
  auto client = AttentionClient::Connect(client_options);
  ASSERT_TRUE(client.ok()) << client.status();
  RegionsArena arena(**client);
  ASSERT_TRUE(arena.Register());

  // Each request its own batch size (so its part starts at its own offset),
  // its own random inputs, and its own mix of places; on CUDA the last one
  // reads and writes CUDA regions, which a stacked launch copies.
  const Where device_or_system = kCuda ? Where::kDevice : Where::kSystem;
  const Placement placements[kRequests] = {
      {Where::kMessage, Where::kMessage, Where::kMessage, Where::kMessage, Where::kMessage},
      {Where::kSystem, Where::kSystem, Where::kSystem, Where::kMessage, Where::kSystem},
      {Where::kMessage, Where::kMessage, Where::kMessage, Where::kSystem, Where::kSystem},
      {device_or_system, device_or_system, Where::kMessage, device_or_system, Where::kMessage},
  };
  std::vector<ProblemInputs> inputs;
  std::vector<absl::StatusOr<AttendResult>> results(kRequests, absl::UnknownError("not run"));
  std::vector<absl::Notification> done(kRequests);
  std::vector<AttendOptions> options(kRequests);
  for (int i = 0; i < kRequests; ++i) {
    AttentionProblem problem = AttentionProblem::SelfAttention(1 + i % 2, 128, 2, 128);
    problem.causal = true;
    problem.return_lse = true;
    inputs.push_back(MakeProblemInputs(problem, DType::kBFloat16, FreshSeed()));
    const ProblemInputs& in = inputs.back();
    const Placement& p = placements[i];
    auto request = std::make_shared<AttentionInputs>();
    request->dtype = DType::kBFloat16;
    request->shape = {problem.batch, problem.seqlen_q, problem.heads_q, problem.head_dim};
    request->q_ref = arena.PlaceInput(p.q, 3 * i, ToBytes(in.q), &request->q);
    request->k_ref = arena.PlaceInput(p.k, 3 * i + 1, ToBytes(in.k), &request->k);
    request->v_ref = arena.PlaceInput(p.v, 3 * i + 2, ToBytes(in.v), &request->v);
    options[i].causal = true;
    options[i].return_lse = true;
    options[i].out_ref = arena.PlaceOutput(p.out, 2 * i, problem.QBytes(DType::kBFloat16));
    options[i].lse_ref = arena.PlaceOutput(p.lse, 2 * i + 1, problem.LseBytes());
    (*client)->AttendAsync(request, options[i], [&, i](absl::StatusOr<AttendResult> result) {
      results[i] = std::move(result);
      done[i].Notify();
    });
  }
  for (int i = 0; i < kRequests; ++i) {
    ASSERT_TRUE(done[i].WaitForNotificationWithTimeout(absl::Seconds(150))) << i;
  }
  for (int i = 0; i < kRequests; ++i) {
    SCOPED_TRACE(absl::StrCat("request ", i, ": ", Describe(inputs[i])));
    ASSERT_TRUE(results[i].ok()) << results[i].status();
    const AttendResult& result = *results[i];
    const Placement& p = placements[i];
    const AttentionProblem& problem = inputs[i].problem;
    EXPECT_EQ(result.server.batch_size, kRequests) << "every request shared the one launch";
    EXPECT_EQ(result.server.q_path, ExpectedPath(p.q));
    EXPECT_EQ(result.server.k_path, ExpectedPath(p.k));
    EXPECT_EQ(result.server.v_path, ExpectedPath(p.v));
    EXPECT_EQ(result.server.out_path, ExpectedPath(p.out));
    EXPECT_EQ(result.server.lse_path, ExpectedPath(p.lse));
    const std::string out = p.out == Where::kMessage
                                ? result.out
                                : arena.ReadOutput(p.out, 2 * i, problem.QBytes(DType::kBFloat16));
    const std::string lse = p.lse == Where::kMessage
                                ? LseBytes(result.lse)
                                : arena.ReadOutput(p.lse, 2 * i + 1, problem.LseBytes());
    if (p.out != Where::kMessage) EXPECT_TRUE(result.out.empty());
    if (p.lse != Where::kMessage) EXPECT_TRUE(result.lse.empty());
    EXPECT_TRUE(ProblemOutputMatchesReference(inputs[i], out, lse, /*tolerance=*/1e-2,
                                              /*lse_tolerance=*/1e-3));
  }
  auto stats = (*client)->GetStats();
  ASSERT_TRUE(stats.ok()) << stats.status();
  EXPECT_EQ(stats->batched_launches(), 1);
  EXPECT_EQ(stats->batched_requests(), kRequests);
}

}  // namespace
}  // namespace attn::testing
