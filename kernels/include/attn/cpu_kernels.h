// attn/cpu_kernels.h
//
// The CPU kernels by name (kCpuKernelName, kCpuFlashKernelName), on a
// caller's thread pool: what the CPU backend's executor runs.
#ifndef ATTN_CPU_KERNELS_H_
#define ATTN_CPU_KERNELS_H_

#include <atomic>

#include "absl/strings/string_view.h"
#include "attn/cpu_thread_pool.h"
#include "attn/problem.h"

namespace attn {

// Runs CPU kernel `name` (the caller checked ValidateArgs for it) on
// `pool`; `cancel` as AttentionCpuFlash. Returns false when cancelled. A
// name that is no CPU kernel is a caller's bug: it runs the reference.
bool RunCpuKernel(absl::string_view name, const AttentionArgs& args, CpuThreadPool& pool,
                  const std::atomic<bool>* cancel = nullptr);

}  // namespace attn

#endif  // ATTN_CPU_KERNELS_H_
