// The CPU kernels as a kernel library of attn::kernels: "cpu_reference"
// (attn/cpu_reference.h) and "cpu_flash" (attn/cpu_flash.h), every feature,
// host pointers. Through Forward and the C ABI they run on the process's
// DefaultCpuThreadPool(); the CPU backend runs them on its own pool.
#include "attn/attention.h"
#include "attn/cpu_flash.h"
#include "attn/cpu_kernels.h"
#include "attn/cpu_reference.h"
#include "attn/kernel_library.h"
#include "builtin_libraries.h"

namespace attn {

bool RunCpuKernel(absl::string_view name, const AttentionArgs& args, CpuThreadPool& pool,
                  const std::atomic<bool>* cancel) {
  if (name == kCpuFlashKernelName) return AttentionCpuFlash(args, pool, cancel);
  return AttentionCpu(args, pool, cancel);
}

namespace internal {
namespace {

KernelInfo CpuKernelInfo(absl::string_view name) {
  KernelInfo info;
  info.name = std::string(name);
  info.description = name == kCpuFlashKernelName
                         ? "CPU flash attention: Q tiles against K/V blocks on "
                           "oneDNN matmuls (bf16 where the "
                           "host has them, else f32), f32 online softmax, "
                           "thread pool; every feature"
                         : "CPU reference: fp32 accumulation, tiled online "
                           "softmax, multi-threaded; every feature";
  info.backend = Backend::kCpu;
  KernelCapabilities& caps = info.caps;
  caps.causal = caps.window = caps.gqa = caps.seqlen_q_ne_k = caps.lse = caps.varlen =
      caps.strided = caps.kv_cache = true;
  return info;
}

absl::Status LaunchCpu(const void* /*impl*/, const KernelInfo& info, const AttentionArgs& args,
                       CUstream_st* /*stream*/) {
  RunCpuKernel(info.name, args, DefaultCpuThreadPool());
  return absl::OkStatus();
}

class CpuLibrary : public KernelLibrary {
 public:
  std::vector<KernelInfo> List() const override {
    return {CpuKernelInfo(kCpuKernelName), CpuKernelInfo(kCpuFlashKernelName)};
  }
  absl::StatusOr<KernelHandle> Resolve(absl::string_view name,
                                       const DeviceInfo* /*device*/) const override {
    if (name != kCpuKernelName && name != kCpuFlashKernelName) return absl::NotFoundError(name);
    return KernelHandle(CpuKernelInfo(name), &LaunchCpu, nullptr);
  }
};

}  // namespace

const KernelLibrary& CpuKernelLibrary() {
  static const CpuLibrary* library = new CpuLibrary;
  return *library;
}

}  // namespace internal
}  // namespace attn
