// GPU seam of a build without CUDA: no GPU kernels, nothing to launch.
#include "attn/device.h"
#include "gpu_kernels.h"

namespace attn {

bool BuiltWithCuda() { return false; }
std::vector<DeviceInfo> ListCudaDevices() { return {}; }

namespace internal {

std::vector<KernelInfo> GpuKernels() { return {}; }
std::vector<KernelInfo> GpuTuningCandidates() { return {}; }

absl::Status LaunchGpuKernel(const KernelInfo& kernel, const AttentionArgs&, CUstream_st*) {
  return absl::FailedPreconditionError("kernel '" + kernel.name +
                                       "' needs CUDA, and this build has no CUDA support");
}

}  // namespace internal
}  // namespace attn
