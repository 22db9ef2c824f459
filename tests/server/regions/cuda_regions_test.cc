// CUDA regions end to end (issue 12), on a GPU host: this process allocates
// Q, K, V and the outputs on the GPU and exports them by CUDA IPC; a CUDA
// attn_server (a child process: a process cannot open its own IPC handles)
// runs the kernel on them in place. Also a system region on the CUDA backend
// (page-locked, DMA straight to and from it). Skips without a GPU.
#include <cuda_runtime_api.h>

#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "attn/client/attention_client.h"
#include "attn/client/shared_memory.h"
#include "cuda_test_util.h"
#include "e2e_util.h"
#include "grpc/grpc.h"
#include "gtest/gtest.h"
#include "server_process.h"
#include "test_util.h"

namespace attn::testing {
namespace {

std::string IpcHandleOf(void* device_pointer) {
  cudaIpcMemHandle_t handle;
  if (cudaIpcGetMemHandle(&handle, device_pointer) != cudaSuccess) return "";
  return std::string(reinterpret_cast<const char*>(&handle), sizeof(handle));
}

std::string ToBytes(const std::vector<uint16_t>& v) {
  return std::string(reinterpret_cast<const char*>(v.data()), v.size() * 2);
}

class CudaRegionsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ATTN_SKIP_WITHOUT_GPU();
    static const bool kept_up = (grpc_init(), true);
    static_cast<void>(kept_up);
    ServerProcess::Options options;
    options.flags = {"--backend=cuda", "--allow_shared_memory", "--streams_per_device=2"};
    options.start_timeout = absl::Seconds(120);
    auto server = ServerProcess::Start(options);
    ASSERT_TRUE(server.ok()) << server.status();
    server_ = *std::move(server);
    ClientOptions client_options;
    client_options.address = server_->address();
    auto client = AttentionClient::Connect(client_options);
    ASSERT_TRUE(client.ok()) << client.status();
    client_ = *std::move(client);
  }

  std::unique_ptr<ServerProcess> server_;
  std::unique_ptr<AttentionClient> client_;
};

// GQA, causal, LSE: Q, K, V read and O, LSE written by the kernel in the
// client's own GPU memory; checked against float64.
TEST_F(CudaRegionsTest, KernelReadsAndWritesClientGpuMemory) {
  AttentionProblem problem = AttentionProblem::SelfAttention(2, 384, 8, 128);
  problem.heads_kv = 2;
  problem.causal = true;
  problem.return_lse = true;
  const ProblemInputs in = MakeProblemInputs(problem, DType::kBFloat16, FreshSeed());
  const int64_t q = in.q.size() * 2, kv = in.k.size() * 2, lse = problem.LseBytes();
  // One allocation for the inputs, one for the outputs; poisoned outputs.
  const int64_t k_at = q, v_at = q + kv;
  DeviceBuffer inputs(static_cast<size_t>(q + 2 * kv));
  DeviceBuffer outputs(static_cast<size_t>(q + lse));
  ASSERT_NE(inputs.get(), nullptr);
  ASSERT_NE(outputs.get(), nullptr);
  char* in_base = static_cast<char*>(inputs.get());
  ATTN_ASSERT_CUDA(cudaMemcpy(in_base, in.q.data(), q, cudaMemcpyHostToDevice));
  ATTN_ASSERT_CUDA(cudaMemcpy(in_base + k_at, in.k.data(), kv, cudaMemcpyHostToDevice));
  ATTN_ASSERT_CUDA(cudaMemcpy(in_base + v_at, in.v.data(), kv, cudaMemcpyHostToDevice));
  ATTN_ASSERT_CUDA(cudaMemset(outputs.get(), 0x55, q + lse));

  int device = 0;
  ATTN_ASSERT_CUDA(cudaGetDevice(&device));
  auto in_region = client_->RegisterCudaRegion("in", IpcHandleOf(inputs.get()), device, 0,
                                               q + 2 * kv);
  ASSERT_TRUE(in_region.ok()) << in_region.status();
  auto out_region =
      client_->RegisterCudaRegion("out", IpcHandleOf(outputs.get()), device, 0, q + lse);
  ASSERT_TRUE(out_region.ok()) << out_region.status();

  AttentionInputs request;
  request.dtype = DType::kBFloat16;
  request.shape = {2, 384, 8, 128};
  request.kv_num_heads = 2;
  request.q_ref = {in_region->region_id(), 0, q};
  request.k_ref = {in_region->region_id(), k_at, kv};
  request.v_ref = {in_region->region_id(), v_at, kv};
  AttendOptions options;
  options.causal = true;
  options.return_lse = true;
  options.out_ref = {out_region->region_id(), 0, q};
  options.lse_ref = {out_region->region_id(), q, lse};
  auto result = client_->Attend(request, options);
  ASSERT_TRUE(result.ok()) << result.status();
  EXPECT_TRUE(result->out.empty());
  EXPECT_EQ(result->server.q_path, TensorPath::kCudaIpc);
  EXPECT_EQ(result->server.out_path, TensorPath::kCudaIpc);
  EXPECT_EQ(result->server.lse_path, TensorPath::kCudaIpc);

  std::string out(static_cast<size_t>(q), '\0'), lse_bytes(static_cast<size_t>(lse), '\0');
  ATTN_ASSERT_CUDA(cudaMemcpy(out.data(), outputs.get(), q, cudaMemcpyDeviceToHost));
  ATTN_ASSERT_CUDA(cudaMemcpy(lse_bytes.data(), static_cast<char*>(outputs.get()) + q, lse,
                              cudaMemcpyDeviceToHost));
  EXPECT_TRUE(ProblemOutputMatchesReference(in, out, lse_bytes, 2e-2, 1e-3));

  // The same inputs inline give the same bits.
  AttentionInputs inline_request = request;
  inline_request.q_ref = inline_request.k_ref = inline_request.v_ref = {};
  inline_request.q = ToBytes(in.q);
  inline_request.k = ToBytes(in.k);
  inline_request.v = ToBytes(in.v);
  AttendOptions inline_options = options;
  inline_options.out_ref = inline_options.lse_ref = {};
  auto inline_result = client_->Attend(inline_request, inline_options);
  ASSERT_TRUE(inline_result.ok()) << inline_result.status();
  EXPECT_EQ(inline_result->out, out);
  EXPECT_EQ(inline_result->server.q_path, TensorPath::kInline);
}

TEST_F(CudaRegionsTest, BadCudaRegionsAreRefused) {
  DeviceBuffer buffer(1 << 20);
  ASSERT_NE(buffer.get(), nullptr);
  int device = 0;
  ATTN_ASSERT_CUDA(cudaGetDevice(&device));
  const std::string handle = IpcHandleOf(buffer.get());
  // Past the allocation's end.
  auto past = client_->RegisterCudaRegion("past", handle, device, 0, (1 << 20) + 4096);
  EXPECT_EQ(past.status().code(), absl::StatusCode::kInvalidArgument) << past.status();
  EXPECT_TRUE(absl::StrContains(past.status().message(), "past the end")) << past.status();
  // Not a handle.
  auto junk = client_->RegisterCudaRegion("junk", std::string(64, 'x'), device, 0, 4096);
  EXPECT_EQ(junk.status().code(), absl::StatusCode::kInvalidArgument) << junk.status();
  auto short_handle = client_->RegisterCudaRegion("short", "abc", device, 0, 4096);
  EXPECT_EQ(short_handle.status().code(), absl::StatusCode::kInvalidArgument);
  auto bad_device = client_->RegisterCudaRegion("dev", handle, 99, 0, 4096);
  EXPECT_EQ(bad_device.status().code(), absl::StatusCode::kInvalidArgument);
  // Two regions in one allocation (the server opens the handle once).
  EXPECT_TRUE(client_->RegisterCudaRegion("a", handle, device, 0, 4096).ok());
  EXPECT_TRUE(client_->RegisterCudaRegion("b", handle, device, 4096, 4096).ok());
  EXPECT_TRUE(client_->UnregisterRegion("a").ok());
  EXPECT_TRUE(client_->UnregisterRegion("b").ok());
  // The server still serves.
  auto health = server_->Health();
  ASSERT_TRUE(health.ok());
  EXPECT_EQ(*health, grpc::health::v1::HealthCheckResponse::SERVING);
}

// A system region on the CUDA backend: page-locked by the server, copied to
// and from the GPU by DMA.
TEST_F(CudaRegionsTest, SystemRegionOnTheCudaBackend) {
  const ProblemInputs in = MakeProblemInputs(AttentionProblem::SelfAttention(1, 1024, 16, 128),
                                             DType::kFloat16, FreshSeed());
  const int64_t q = in.q.size() * 2;
  auto shm = SharedMemory::Create(4 * q);
  ASSERT_TRUE(shm.ok()) << shm.status();
  std::memcpy((*shm)->data(), in.q.data(), q);
  std::memcpy((*shm)->data() + q, in.k.data(), q);
  std::memcpy((*shm)->data() + 2 * q, in.v.data(), q);
  auto region = client_->RegisterSystemRegion("io", (*shm)->name(), 0, 4 * q);
  ASSERT_TRUE(region.ok()) << region.status();
  AttentionInputs request;
  request.dtype = DType::kFloat16;
  request.shape = {1, 1024, 16, 128};
  request.q_ref = {region->region_id(), 0, q};
  request.k_ref = {region->region_id(), q, q};
  request.v_ref = {region->region_id(), 2 * q, q};
  AttendOptions options;
  options.out_ref = {region->region_id(), 3 * q, q};
  auto result = client_->Attend(request, options);
  ASSERT_TRUE(result.ok()) << result.status();
  EXPECT_EQ(result->server.q_path, TensorPath::kSystemShm);
  EXPECT_EQ(result->server.out_path, TensorPath::kSystemShm);
  EXPECT_TRUE(ProblemOutputMatchesReference(
      in, std::string((*shm)->data() + 3 * q, static_cast<size_t>(q)), "", 2e-2, 0));
}

}  // namespace
}  // namespace attn::testing
