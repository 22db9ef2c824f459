// attn/device.h
//
// What CUDA devices this host has, as the library sees them. Safe to call in
// CPU-only builds and on hosts without a GPU (it reports none).
#ifndef ATTN_DEVICE_H_
#define ATTN_DEVICE_H_

#include <cstdint>
#include <string>
#include <vector>

namespace attn {

struct DeviceInfo {
  int ordinal = 0;
  std::string name;  // e.g. "NVIDIA H200"
  int compute_major = 0;
  int compute_minor = 0;
  int multiprocessors = 0;
  int64_t total_memory_bytes = 0;
};

// True when this build includes the CUDA kernels.
bool BuiltWithCuda();

// Devices usable by the kernels (compute capability >= 8.0); empty without a
// GPU, without a driver, or in a CPU-only build.
std::vector<DeviceInfo> ListCudaDevices();

}  // namespace attn

#endif  // ATTN_DEVICE_H_
