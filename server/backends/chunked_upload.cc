// ChunkedUpload (chunked_upload.h). CUDA builds only.
#include "backends/chunked_upload.h"

#include <algorithm>
#include <cstdint>
#include <utility>

#include "absl/strings/str_format.h"
#include "core/status_util.h"

namespace attn::server {

absl::StatusOr<std::unique_ptr<ChunkedUpload>> ChunkedUpload::Create(char* ring,
                                                                     size_t slot_bytes,
                                                                     int slots, int device,
                                                                     ParallelCopier* copier) {
  if (ring == nullptr || slot_bytes == 0 || slots < 1 || copier == nullptr) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "ChunkedUpload needs a ring of at least one slot of at least one byte and a copier "
        "(slots %d, slot bytes %d)",
        slots, slot_bytes));
  }
  std::unique_ptr<ChunkedUpload> upload(new ChunkedUpload(ring, slot_bytes, device, copier));
  for (int s = 0; s < slots; ++s) {
    ASSIGN_OR_RETURN(CudaEvent event, CreateEvent(device, /*blocking_sync=*/true));
    upload->slot_read_.push_back(std::move(event));
  }
  return upload;
}

absl::Status ChunkedUpload::Enqueue(absl::Span<const Tensor> tensors, cudaStream_t stream) {
  const int64_t slot_bytes = static_cast<int64_t>(slot_bytes_);
  for (const Tensor& tensor : tensors) {
    const int64_t size = tensor.source->size();
    for (int64_t at = 0; at < size; at += slot_bytes) {
      const int64_t bytes = std::min(slot_bytes, size - at);
      cudaEvent_t read = slot_read_[next_slot_].get();
      char* slot = ring_ + static_cast<size_t>(next_slot_) * slot_bytes_;
      // A never-recorded event counts as finished.
      CUDA_RETURN_IF_ERROR(cudaEventSynchronize(read), device_);
      copier_->Copy({{tensor.source, slot, at, bytes}});
      CUDA_RETURN_IF_ERROR(cudaMemcpyAsync(static_cast<char*>(tensor.device) + at, slot,
                                           static_cast<size_t>(bytes), cudaMemcpyHostToDevice,
                                           stream),
                           device_);
      CUDA_RETURN_IF_ERROR(cudaEventRecord(read, stream), device_);
      next_slot_ = (next_slot_ + 1) % static_cast<int>(slot_read_.size());
    }
  }
  return absl::OkStatus();
}

}  // namespace attn::server
