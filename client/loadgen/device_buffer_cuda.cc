// DeviceBuffer on the CUDA runtime (builds with CUDA).
#include <cuda_runtime.h>

#include "absl/strings/str_cat.h"
#include "device_buffer.h"

namespace attn::loadgen {
namespace {

absl::Status Check(cudaError_t error, const char* what) {
  if (error == cudaSuccess) return absl::OkStatus();
  return absl::InternalError(absl::StrCat(what, ": ", cudaGetErrorName(error), " (",
                                          cudaGetErrorString(error), ")"));
}

class CudaBuffer final : public DeviceBuffer {
 public:
  CudaBuffer(int device, void* data, int64_t size) : device_(device), data_(data), size_(size) {}
  ~CudaBuffer() override {
    cudaSetDevice(device_);
    cudaFree(data_);
  }
  int device() const override { return device_; }
  int64_t size() const override { return size_; }
  std::string IpcHandle() const override {
    cudaIpcMemHandle_t handle;
    cudaSetDevice(device_);
    if (cudaIpcGetMemHandle(&handle, data_) != cudaSuccess) return "";
    return std::string(reinterpret_cast<const char*>(&handle), sizeof(handle));
  }
  absl::Status CopyIn(int64_t offset, const void* data, int64_t bytes) override {
    if (absl::Status s = Check(cudaSetDevice(device_), "cudaSetDevice"); !s.ok()) return s;
    return Check(cudaMemcpy(static_cast<char*>(data_) + offset, data, static_cast<size_t>(bytes),
                            cudaMemcpyHostToDevice),
                 "cudaMemcpy to the device");
  }
  absl::Status CopyOut(int64_t offset, void* data, int64_t bytes) const override {
    if (absl::Status s = Check(cudaSetDevice(device_), "cudaSetDevice"); !s.ok()) return s;
    return Check(cudaMemcpy(data, static_cast<const char*>(data_) + offset,
                            static_cast<size_t>(bytes), cudaMemcpyDeviceToHost),
                 "cudaMemcpy from the device");
  }
  absl::Status Fill(int64_t offset, int value, int64_t bytes) override {
    if (absl::Status s = Check(cudaSetDevice(device_), "cudaSetDevice"); !s.ok()) return s;
    if (absl::Status s = Check(cudaMemset(static_cast<char*>(data_) + offset, value,
                                          static_cast<size_t>(bytes)),
                               "cudaMemset");
        !s.ok()) {
      return s;
    }
    return Check(cudaDeviceSynchronize(), "cudaDeviceSynchronize");
  }

 private:
  const int device_;
  void* const data_;
  const int64_t size_;
};

}  // namespace

absl::StatusOr<std::unique_ptr<DeviceBuffer>> DeviceBuffer::Allocate(int device, int64_t bytes) {
  if (absl::Status s = Check(cudaSetDevice(device), "cudaSetDevice"); !s.ok()) return s;
  void* data = nullptr;
  if (absl::Status s = Check(cudaMalloc(&data, static_cast<size_t>(bytes)), "cudaMalloc");
      !s.ok()) {
    return s;
  }
  return std::unique_ptr<DeviceBuffer>(new CudaBuffer(device, data, bytes));
}

}  // namespace attn::loadgen
