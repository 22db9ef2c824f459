// Device-memory helpers for the GPU tests: RAII buffers and a skip guard.
#ifndef ATTN_TESTS_KERNELS_CUDA_TEST_UTIL_H_
#define ATTN_TESTS_KERNELS_CUDA_TEST_UTIL_H_

#include <cuda_runtime_api.h>
#include <gtest/gtest.h>

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

// An owned device allocation; contents undefined until written.
class DeviceBuffer {
 public:
  explicit DeviceBuffer(size_t bytes) : bytes_(bytes) {
    if (cudaMalloc(&ptr_, bytes) != cudaSuccess) ptr_ = nullptr;
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
