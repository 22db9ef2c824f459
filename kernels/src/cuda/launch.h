// Host-side declaration of the kernel launcher, explicitly instantiated in
// generated instance_*.cu files (see CMakeLists.txt), so nvcc compiles the
// variants in parallel and host code never sees device code.
#ifndef ATTN_KERNELS_SRC_CUDA_LAUNCH_H_
#define ATTN_KERNELS_SRC_CUDA_LAUNCH_H_

#include <cuda_runtime_api.h>

#include "attn/dtype.h"
#include "fwd_params.h"

namespace attn::fa2 {

// Launches FlashFwdKernel<Config, kDType, kEven, kMasked> on `stream`: grid,
// block and dynamic shared memory come from the configuration and params.
// Returns the launch's error (execution errors surface at the next
// synchronisation).
template <class Config, DType kDType, bool kEven, bool kMasked>
cudaError_t LaunchFlashFwd(const FwdParams& params, cudaStream_t stream);

using LaunchFn = cudaError_t (*)(const FwdParams&, cudaStream_t);

// The launchers of one configuration, by [bf16][even][masked]; null where a
// variant is not instantiated (the ladder has only even, unmasked ones).
struct Launchers {
  LaunchFn fn[2][2][2] = {};
  LaunchFn Get(DType dtype, bool even, bool masked) const {
    return fn[dtype == DType::kBFloat16][even][masked];
  }
};

// Ladder steps: the seed's problem only (even lengths, no mask).
template <class Config>
Launchers LadderLaunchers() {
  Launchers l;
  l.fn[0][1][0] = &LaunchFlashFwd<Config, DType::kFloat16, true, false>;
  l.fn[1][1][0] = &LaunchFlashFwd<Config, DType::kBFloat16, true, false>;
  return l;
}

// The production kernel: every variant.
template <class Config>
Launchers AllLaunchers() {
  Launchers l;
  l.fn[0][0][0] = &LaunchFlashFwd<Config, DType::kFloat16, false, false>;
  l.fn[0][0][1] = &LaunchFlashFwd<Config, DType::kFloat16, false, true>;
  l.fn[0][1][0] = &LaunchFlashFwd<Config, DType::kFloat16, true, false>;
  l.fn[0][1][1] = &LaunchFlashFwd<Config, DType::kFloat16, true, true>;
  l.fn[1][0][0] = &LaunchFlashFwd<Config, DType::kBFloat16, false, false>;
  l.fn[1][0][1] = &LaunchFlashFwd<Config, DType::kBFloat16, false, true>;
  l.fn[1][1][0] = &LaunchFlashFwd<Config, DType::kBFloat16, true, false>;
  l.fn[1][1][1] = &LaunchFlashFwd<Config, DType::kBFloat16, true, true>;
  return l;
}

}  // namespace attn::fa2

#endif  // ATTN_KERNELS_SRC_CUDA_LAUNCH_H_
