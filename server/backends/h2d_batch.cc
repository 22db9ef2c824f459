#include "backends/h2d_batch.h"

#include <atomic>

#include "backends/cuda_memory.h"
#include "core/log.h"

namespace attn::server {

absl::Status H2DBatch::Enqueue(cudaStream_t stream) {
  if (to_.empty()) return absl::OkStatus();
  static std::atomic<bool> batch_unsupported{false};
  if (!batch_unsupported.load(std::memory_order_relaxed)) {
    // In stream order: the sources (the request's buffers) stay valid and
    // unchanged until the request is done, after the stream has run these.
    cudaMemcpyAttributes attributes{};
    attributes.srcAccessOrder = cudaMemcpySrcAccessOrderStream;
    size_t first_copy = 0;
    const cudaError_t error =
        cudaMemcpyBatchAsync(to_.data(), from_.data(), bytes_.data(), to_.size(), &attributes,
                             &first_copy, 1, stream);
    if (error != cudaErrorNotSupported && error != cudaErrorCallRequiresNewerDriver) {
      return CudaStatus(error, "cudaMemcpyBatchAsync", device_, __FILE__, __LINE__);
    }
    cudaGetLastError();  // not sticky: clear it
    if (!batch_unsupported.exchange(true)) {
      LOGF(kWarning,
           "cuda:%d: no batched copies (cudaMemcpyBatchAsync: %s); tensors in the pinned heap "
           "are copied with one cudaMemcpyAsync per slice",
           device_, cudaGetErrorString(error));
    }
  }
  for (size_t i = 0; i < to_.size(); ++i) {
    CUDA_RETURN_IF_ERROR(
        cudaMemcpyAsync(to_[i], from_[i], bytes_[i], cudaMemcpyHostToDevice, stream), device_);
  }
  return absl::OkStatus();
}

}  // namespace attn::server
