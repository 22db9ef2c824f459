// client/loadgen/device_buffer.h
//
// GPU memory this process allocates and exports for a CUDA region
// (cudaMalloc + cudaIpcGetMemHandle): attn_loadgen --shared_memory=cuda
// keeps its tensors there, as perf_analyzer --shared-memory=cuda does. In a
// build without CUDA, Allocate says so (FAILED_PRECONDITION).
#ifndef ATTN_CLIENT_LOADGEN_DEVICE_BUFFER_H_
#define ATTN_CLIENT_LOADGEN_DEVICE_BUFFER_H_

#include <cstdint>
#include <memory>
#include <string>

#include "absl/status/statusor.h"

namespace attn::loadgen {

class DeviceBuffer {
 public:
  static absl::StatusOr<std::unique_ptr<DeviceBuffer>> Allocate(int device, int64_t bytes);
  virtual ~DeviceBuffer() = default;
  virtual int device() const = 0;
  virtual int64_t size() const = 0;
  // The cudaIpcMemHandle_t bytes another process opens the memory with.
  virtual std::string IpcHandle() const = 0;
  virtual absl::Status CopyIn(int64_t offset, const void* data, int64_t bytes) = 0;
  virtual absl::Status CopyOut(int64_t offset, void* data, int64_t bytes) const = 0;
  // Sets the bytes [offset, offset + bytes) to `value`.
  virtual absl::Status Fill(int64_t offset, int value, int64_t bytes) = 0;
};

}  // namespace attn::loadgen

#endif  // ATTN_CLIENT_LOADGEN_DEVICE_BUFFER_H_
