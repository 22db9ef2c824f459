// CUDA builds only (see cuda_session_memory.h).
#include "backends/cuda_session_memory.h"

#include <cuda_runtime.h>

#include <utility>

#include "absl/strings/str_format.h"
#include "backends/cuda_memory.h"
#include "core/status_util.h"

namespace attn::server {
namespace {

class CudaMemory final : public SessionMemory {
 public:
  CudaMemory(DeviceBuffer memory, CudaStream stream, int ordinal, int64_t num_pages,
             int64_t page_bytes)
      : memory_(std::move(memory)),
        stream_(std::move(stream)),
        layout_{static_cast<char*>(memory_.get()), num_pages, page_bytes, ordinal} {}
  ~CudaMemory() override { cudaSetDevice(layout_.device); }  // members freed on their device

  const PoolLayout& layout() const override { return layout_; }

  absl::Status CopyPage(int32_t dst, int32_t src, int64_t bytes) override {
    // Called from gRPC threads: make the pool's device current on this one.
    const int ordinal = layout_.device;
    CUDA_RETURN_IF_ERROR(cudaSetDevice(ordinal), ordinal);
    const size_t half = static_cast<size_t>(layout_.page_bytes / 2);
    // Both halves (K rows, then V rows) in one 2-D copy: two rows of
    // `bytes`, half a page apart.
    CUDA_RETURN_IF_ERROR(
        cudaMemcpy2DAsync(layout_.base + dst * layout_.page_bytes, half,
                          layout_.base + src * layout_.page_bytes, half,
                          static_cast<size_t>(bytes), 2, cudaMemcpyDeviceToDevice, stream_.get()),
        ordinal);
    CUDA_RETURN_IF_ERROR(cudaStreamSynchronize(stream_.get()), ordinal);
    return absl::OkStatus();
  }

 private:
  DeviceBuffer memory_;
  CudaStream stream_;
  const PoolLayout layout_;
};

}  // namespace

absl::StatusOr<std::unique_ptr<SessionMemory>> CreateCudaSessionMemory(const DeviceInfo& device,
                                                                       int64_t pool_bytes,
                                                                       double free_fraction,
                                                                       int64_t page_bytes) {
  const int ordinal = device.ordinal;
  CUDA_RETURN_IF_ERROR(cudaSetDevice(ordinal), ordinal);
  const char* flag = "--kv_cache_bytes";
  if (free_fraction > 0) {
    size_t free_bytes = 0, total_bytes = 0;
    CUDA_RETURN_IF_ERROR(cudaMemGetInfo(&free_bytes, &total_bytes), ordinal);
    pool_bytes = static_cast<int64_t>(static_cast<double>(free_bytes) * free_fraction);
    flag = "--kv_cache_memory_fraction";
  }
  const int64_t num_pages = PoolPages(pool_bytes, page_bytes);
  if (num_pages < 1) {
    return absl::ResourceExhaustedError(absl::StrFormat(
        "cuda:%d: %s gives the KV-cache pool %d bytes, not one page of %d (--kv_page_bytes)",
        ordinal, flag, pool_bytes, page_bytes));
  }
  const size_t bytes = static_cast<size_t>(num_pages * page_bytes);
  absl::StatusOr<DeviceBuffer> memory = AllocateDevice(bytes, ordinal);
  if (!memory.ok()) {
    cudaGetLastError();  // out of memory is not sticky: clear it
    size_t free_bytes = 0, total_bytes = 0;
    cudaMemGetInfo(&free_bytes, &total_bytes);
    return absl::ResourceExhaustedError(absl::StrFormat(
        "cuda:%d (%s): the KV-cache page pool of %.0f MiB (%s) does not fit beside the "
        "streams' buffers (%.0f MiB free): %s",
        ordinal, device.name, bytes / 1048576.0, flag, free_bytes / 1048576.0,
        memory.status().message()));
  }
  ASSIGN_OR_RETURN(CudaStream stream, CreateStream(ordinal));
  // Zeroed once: rows no session wrote read as zeros, never as whatever
  // the allocator left (the kernels mask them; this makes it certain).
  CUDA_RETURN_IF_ERROR(cudaMemsetAsync(memory->get(), 0, bytes, stream.get()), ordinal);
  CUDA_RETURN_IF_ERROR(cudaStreamSynchronize(stream.get()), ordinal);
  return std::make_unique<CudaMemory>(*std::move(memory), std::move(stream), ordinal, num_pages,
                                      page_bytes);
}

}  // namespace attn::server
