// Internal seam between the backend-neutral registry (registry.cc) and the
// CUDA kernels: implemented by cuda/gpu_kernels.cc in CUDA builds and by
// gpu_kernels_none.cc otherwise.
#ifndef ATTN_KERNELS_SRC_GPU_KERNELS_H_
#define ATTN_KERNELS_SRC_GPU_KERNELS_H_

#include <vector>

#include "absl/status/status.h"
#include "attn/attention.h"

namespace attn::internal {

// The GPU kernels in ladder order, then the production kernel; tile sizes
// resolved for the current device.
std::vector<KernelInfo> GpuKernels();

// The tuning candidates of ladder step 7.
std::vector<KernelInfo> GpuTuningCandidates();

// The GPU kernel or tuning candidate `name`, resolved once (tuned tiles
// included); NOT_FOUND when this build has no GPU kernel of that name.
absl::StatusOr<KernelHandle> ResolveGpuKernel(absl::string_view name);

}  // namespace attn::internal

#endif  // ATTN_KERNELS_SRC_GPU_KERNELS_H_
