// attn/device.h
//
// What CUDA devices this host has, as the library sees them. Safe to call in
// CPU-only builds and on hosts without a GPU (it reports none). Each
// device's facts are read from the driver once per process and cached.
#ifndef ATTN_DEVICE_H_
#define ATTN_DEVICE_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"

namespace attn {

struct DeviceInfo {
  int ordinal = 0;
  std::string name;  // e.g. "NVIDIA H200"
  int compute_major = 0;
  int compute_minor = 0;
  int multiprocessors = 0;
  int64_t total_memory_bytes = 0;

  // major * 10 + minor, the unit of KernelFamily::min_compute_capability.
  int ComputeCapability() const { return compute_major * 10 + compute_minor; }
};

// True when this build includes the CUDA kernels.
bool BuiltWithCuda();

// The facts of device `ordinal`, whatever its compute capability.
// FAILED_PRECONDITION without CUDA, without a driver or without a device of
// that ordinal.
absl::StatusOr<DeviceInfo> GetCudaDevice(int ordinal);

// Devices some kernel family of this build runs on (compute capability 8.0
// or newer today); empty without a GPU, without a driver, or in a CPU-only
// build.
std::vector<DeviceInfo> ListCudaDevices();

}  // namespace attn

#endif  // ATTN_DEVICE_H_
