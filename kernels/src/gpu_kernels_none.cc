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

namespace {

// The names of every GPU kernel a CUDA build has (the one table the CUDA
// build reads too), so a CPU-only build can say what such a name is.
bool IsCudaKernelName(absl::string_view name) {
  static const char* const kNames[] = {
#define ATTN_STEP(step, kernel_name, description) kernel_name,
#define ATTN_KERNEL(kernel_name, step, config, description) kernel_name,
#define ATTN_PRODUCTION(config)
#include "cuda/kernel_table.inc"
#undef ATTN_STEP
#undef ATTN_KERNEL
#undef ATTN_PRODUCTION
      kProductionKernelName,
  };
  for (const char* known : kNames) {
    if (name == known) return true;
  }
  return false;
}

}  // namespace

absl::StatusOr<KernelHandle> ResolveGpuKernel(absl::string_view name) {
  if (IsCudaKernelName(name)) {
    return absl::FailedPreconditionError(absl::StrCat(
        "kernel '", name, "' is a CUDA kernel, and this build has none (it was built without "
        "CUDA); build with nvcc for it, or use the CPU kernel '", kCpuKernelName, "'"));
  }
  return absl::NotFoundError(
      absl::StrCat("no GPU kernel '", name, "': this build has no CUDA support"));
}

}  // namespace internal
}  // namespace attn
