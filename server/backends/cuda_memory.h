// server/backends/cuda_memory.h
//
// RAII owners of CUDA resources for the CUDA executor, and the one place
// that turns cudaError_t into absl::Status. CUDA builds only (includes
// cuda_runtime.h); nothing outside cuda_*.cc includes it.
//
// Factories return StatusOr; destructors release without checking (there is
// nothing useful to do about a failed free) and tolerate moved-from objects.
// Resources belong to the device current when they were created; destroy
// them with that device current.
#ifndef ATTN_SERVER_CUDA_MEMORY_H_
#define ATTN_SERVER_CUDA_MEMORY_H_

#include <cuda_runtime.h>

#include <cstddef>
#include <utility>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace attn::server {

// OK for cudaSuccess; else INTERNAL (RESOURCE_EXHAUSTED for out-of-memory)
// "<call> failed on cuda:<device>: <cuda error name>: <text> (<file>:<line>)".
absl::Status CudaStatus(cudaError_t error, const char* call, int device, const char* file,
                        int line);

}  // namespace attn::server

// Evaluates a CUDA runtime call; returns its error as a Status naming the
// call, the device and the call site.
#define CUDA_RETURN_IF_ERROR(call, device)                                                      \
  do {                                                                                          \
    if (const cudaError_t attn_cuda_error_ = (call); attn_cuda_error_ != cudaSuccess) {         \
      return ::attn::server::CudaStatus(attn_cuda_error_, #call, (device), __FILE__, __LINE__); \
    }                                                                                           \
  } while (false)

namespace attn::server {

// Move-only owner of a handle with a release function.
template <typename Handle, cudaError_t (*Release)(Handle)>
class CudaHandle {
 public:
  CudaHandle() = default;
  explicit CudaHandle(Handle handle) : handle_(handle) {}
  ~CudaHandle() { Reset(); }
  CudaHandle(CudaHandle&& other) noexcept : handle_(std::exchange(other.handle_, Handle{})) {}
  CudaHandle& operator=(CudaHandle&& other) noexcept {
    if (this != &other) {
      Reset();
      handle_ = std::exchange(other.handle_, Handle{});
    }
    return *this;
  }
  Handle get() const { return handle_; }
  void Reset() {
    if (handle_ != Handle{}) Release(handle_);
    handle_ = Handle{};
  }

 private:
  Handle handle_{};
};

using DeviceBuffer = CudaHandle<void*, cudaFree>;      // cudaMalloc'd memory
using PinnedBuffer = CudaHandle<void*, cudaFreeHost>;  // cudaHostAlloc'd memory
using CudaStream = CudaHandle<cudaStream_t, cudaStreamDestroy>;
using CudaEvent = CudaHandle<cudaEvent_t, cudaEventDestroy>;

// `bytes` of device memory on the current device (256-byte aligned).
absl::StatusOr<DeviceBuffer> AllocateDevice(size_t bytes, int device);
// `bytes` of page-locked host memory (for asynchronous copies).
absl::StatusOr<PinnedBuffer> AllocatePinned(size_t bytes, int device);
// A non-blocking stream (no implicit sync with the legacy default stream).
absl::StatusOr<CudaStream> CreateStream(int device);
// An event with timing; `blocking_sync` makes cudaEventSynchronize sleep
// instead of spinning a CPU core.
absl::StatusOr<CudaEvent> CreateEvent(int device, bool blocking_sync);

}  // namespace attn::server

#endif  // ATTN_SERVER_CUDA_MEMORY_H_
