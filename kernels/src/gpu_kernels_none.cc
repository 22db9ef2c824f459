// GPU seam of a build without CUDA: no GPU kernels, nothing to launch.
#include "attn/device.h"
#include "absl/strings/str_cat.h"
#include "gpu_kernels.h"

namespace attn {

bool BuiltWithCuda() { return false; }
std::vector<DeviceInfo> ListCudaDevices() { return {}; }

namespace internal {

std::vector<KernelInfo> GpuKernels() { return {}; }
std::vector<KernelInfo> GpuTuningCandidates() { return {}; }

absl::StatusOr<KernelHandle> ResolveGpuKernel(absl::string_view name) {
  return absl::NotFoundError(
      absl::StrCat("no GPU kernel '", name, "': this build has no CUDA support"));
}

}  // namespace internal
}  // namespace attn
