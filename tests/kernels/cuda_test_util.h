// Device-memory helpers for the GPU tests: RAII buffers and a skip guard.
#ifndef ATTN_TESTS_KERNELS_CUDA_TEST_UTIL_H_
#define ATTN_TESTS_KERNELS_CUDA_TEST_UTIL_H_

#include <cuda_runtime_api.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cstddef>
#include <vector>

#include "attn/device.h"

namespace attn::testing {

#define ATTN_ASSERT_CUDA(expr)                                                   \
  do {                                                                           \
    const cudaError_t attn_err_ = (expr);                                        \
    ASSERT_EQ(attn_err_, cudaSuccess) << #expr << ": " << cudaGetErrorString(attn_err_); \
  } while (0)

// Skips the test, with a message, on a host without a usable CUDA device.
#define ATTN_SKIP_WITHOUT_GPU()                                                   \
  do {                                                                            \
    if (::attn::ListCudaDevices().empty()) GTEST_SKIP() << "no CUDA device with compute capability >= 8.0"; \
  } while (0)

// An owned device allocation (at least 16 bytes, so a zero-sized tensor still
// has a valid, aligned pointer); contents undefined until written.
class DeviceBuffer {
 public:
  explicit DeviceBuffer(size_t bytes) : bytes_(bytes) {
    if (cudaMalloc(&ptr_, std::max<size_t>(bytes, 16)) != cudaSuccess) ptr_ = nullptr;
  }
  // A copy of `host` on the device.
  template <class T>
  explicit DeviceBuffer(const std::vector<T>& host) : DeviceBuffer(host.size() * sizeof(T)) {
    if (ptr_ != nullptr && bytes_ > 0 &&
        cudaMemcpy(ptr_, host.data(), bytes_, cudaMemcpyHostToDevice) != cudaSuccess) {
      cudaFree(ptr_);
      ptr_ = nullptr;
    }
  }
  ~DeviceBuffer() { cudaFree(ptr_); }
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;

  void* get() const { return ptr_; }
  size_t bytes() const { return bytes_; }
  template <class T>
  std::vector<T> ToHost() const {
    std::vector<T> host(bytes_ / sizeof(T));
    if (cudaMemcpy(host.data(), ptr_, bytes_, cudaMemcpyDeviceToHost) != cudaSuccess) host.clear();
    return host;
  }

 private:
  void* ptr_ = nullptr;
  size_t bytes_;
};

}  // namespace attn::testing

#endif  // ATTN_TESTS_KERNELS_CUDA_TEST_UTIL_H_
