// The kernel libraries of attn::kernels itself (attn/kernel_library.h),
// which the registry always has: the CPU reference (cpu_kernel.cc) and the
// production GPU kernel (cuda/flash_fwd.cc; no_cuda.cc without CUDA).
#ifndef ATTN_KERNELS_SRC_BUILTIN_LIBRARIES_H_
#define ATTN_KERNELS_SRC_BUILTIN_LIBRARIES_H_

#include "attn/kernel_library.h"

namespace attn::internal {

const KernelLibrary& CpuKernelLibrary();
const KernelLibrary& ProductionGpuLibrary();

}  // namespace attn::internal

#endif  // ATTN_KERNELS_SRC_BUILTIN_LIBRARIES_H_
