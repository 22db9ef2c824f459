// The CPU reference as a kernel library of attn::kernels: "cpu_reference",
// every feature, host pointers (attn/cpu_reference.h).
#include "attn/attention.h"
#include "attn/cpu_reference.h"
#include "attn/kernel_library.h"
#include "builtin_libraries.h"

namespace attn::internal {
namespace {

KernelInfo CpuKernelInfo() {
  KernelInfo info;
  info.name = kCpuKernelName;
  info.description =
      "CPU reference: fp32 accumulation, tiled online softmax, multi-threaded; every feature";
  info.backend = Backend::kCpu;
  KernelCapabilities& caps = info.caps;
  caps.causal = caps.window = caps.gqa = caps.seqlen_q_ne_k = caps.lse = caps.varlen =
      caps.strided = caps.kv_cache = true;
  return info;
}

absl::Status LaunchCpu(const void* /*impl*/, const KernelInfo& /*info*/,
                       const AttentionArgs& args, CUstream_st* /*stream*/) {
  AttentionCpu(args);
  return absl::OkStatus();
}

class CpuLibrary : public KernelLibrary {
 public:
  std::vector<KernelInfo> List() const override { return {CpuKernelInfo()}; }
  absl::StatusOr<KernelHandle> Resolve(absl::string_view name,
                                       const DeviceInfo* /*device*/) const override {
    if (name != kCpuKernelName) return absl::NotFoundError(name);
    return KernelHandle(CpuKernelInfo(), &LaunchCpu, nullptr);
  }
};

}  // namespace

const KernelLibrary& CpuKernelLibrary() {
  static const CpuLibrary* library = new CpuLibrary;
  return *library;
}

}  // namespace attn::internal
