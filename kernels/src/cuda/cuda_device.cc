// attn/device.h in a CUDA build: each device's facts read once per process.
#include <cuda_runtime_api.h>

#include <map>
#include <mutex>

#include "absl/strings/str_cat.h"
#include "attn/device.h"
#include "attn/kernel_family.h"

namespace attn {

bool BuiltWithCuda() { return true; }

absl::StatusOr<DeviceInfo> GetCudaDevice(int ordinal) {
  static std::mutex mu;
  static std::map<int, DeviceInfo>* cache = new std::map<int, DeviceInfo>;
  std::lock_guard<std::mutex> lock(mu);
  if (auto it = cache->find(ordinal); it != cache->end()) return it->second;
  cudaDeviceProp prop{};
  if (cudaError_t err = cudaGetDeviceProperties(&prop, ordinal); err != cudaSuccess) {
    cudaGetLastError();  // not sticky; keep the thread's error state clean
    return absl::FailedPreconditionError(
        absl::StrCat("CUDA device ", ordinal, ": ", cudaGetErrorString(err)));
  }
  const DeviceInfo device{ordinal,          prop.name,
                          prop.major,       prop.minor,
                          prop.multiProcessorCount, static_cast<int64_t>(prop.totalGlobalMem)};
  cache->emplace(ordinal, device);
  return device;
}

std::vector<DeviceInfo> ListCudaDevices() {
  std::vector<DeviceInfo> devices;
  int count = 0;
  if (cudaGetDeviceCount(&count) != cudaSuccess) {
    cudaGetLastError();
    return devices;
  }
  std::vector<const KernelFamily*> families;
  for (const KernelFamily& family : KernelFamilies()) families.push_back(&family);
  for (int i = 0; i < count; ++i) {
    absl::StatusOr<DeviceInfo> device = GetCudaDevice(i);
    if (device.ok() && BestFamily(families, device->ComputeCapability()) != nullptr) {
      devices.push_back(*std::move(device));
    }
  }
  return devices;
}

}  // namespace attn
