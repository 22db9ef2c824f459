// Host-side declaration of the kernel launcher, explicitly instantiated once
// per configuration in generated instance_*.cu files (see CMakeLists.txt), so
// nvcc compiles the variants in parallel and host code never sees device code.
#ifndef ATTN_KERNELS_SRC_CUDA_LAUNCH_H_
#define ATTN_KERNELS_SRC_CUDA_LAUNCH_H_

#include <cuda_runtime_api.h>

#include "attn/dtype.h"
#include "fwd_params.h"

namespace attn::fa2 {

// Launches FlashFwdKernel<Config, kDType> on `stream`: grid, block and
// dynamic shared memory come from the configuration. Returns the launch's
// error (execution errors surface at the next synchronisation).
template <class Config, DType kDType>
cudaError_t LaunchFlashFwd(const FwdParams& params, cudaStream_t stream);

using LaunchFn = cudaError_t (*)(const FwdParams&, cudaStream_t);

}  // namespace attn::fa2

#endif  // ATTN_KERNELS_SRC_CUDA_LAUNCH_H_
