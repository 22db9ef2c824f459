#include "backends/cuda_memory.h"

#include "absl/strings/str_format.h"

namespace attn::server {

absl::Status CudaStatus(cudaError_t error, const char* call, int device, const char* file,
                        int line) {
  if (error == cudaSuccess) return absl::OkStatus();
  const std::string message =
      absl::StrFormat("%s failed on cuda:%d: %s: %s (%s:%d)", call, device, cudaGetErrorName(error),
                      cudaGetErrorString(error), file, line);
  if (error == cudaErrorMemoryAllocation) return absl::ResourceExhaustedError(message);
  return absl::InternalError(message);
}

absl::StatusOr<DeviceBuffer> AllocateDevice(size_t bytes, int device) {
  void* data = nullptr;
  CUDA_RETURN_IF_ERROR(cudaMalloc(&data, bytes), device);
  return DeviceBuffer(data);
}

absl::StatusOr<PinnedBuffer> AllocatePinned(size_t bytes, int device) {
  void* data = nullptr;
  CUDA_RETURN_IF_ERROR(cudaHostAlloc(&data, bytes, cudaHostAllocDefault), device);
  return PinnedBuffer(data);
}

absl::StatusOr<CudaStream> CreateStream(int device) {
  cudaStream_t stream = nullptr;
  CUDA_RETURN_IF_ERROR(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking), device);
  return CudaStream(stream);
}

absl::StatusOr<CudaEvent> CreateEvent(int device, bool blocking_sync) {
  cudaEvent_t event = nullptr;
  CUDA_RETURN_IF_ERROR(
      cudaEventCreateWithFlags(&event, blocking_sync ? cudaEventBlockingSync : cudaEventDefault),
      device);
  return CudaEvent(event);
}

}  // namespace attn::server
