// The kernel registry and Forward(): the CPU reference plus whatever the GPU
// seam (gpu_kernels.h) provides, resolved by name into KernelHandles.
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "attn/attention.h"
#include "attn/cpu_reference.h"
#include "attn/device.h"
#include "gpu_kernels.h"

namespace attn {

namespace {

KernelInfo CpuKernelInfo() {
  KernelInfo info;
  info.name = kCpuKernelName;
  info.ladder_step = 0;
  info.description =
      "CPU reference: fp32 accumulation, tiled online softmax, multi-threaded; every feature";
  info.backend = Backend::kCpu;
  KernelCapabilities& caps = info.caps;
  caps.causal = caps.window = caps.gqa = caps.seqlen_q_ne_k = caps.lse = caps.varlen =
      caps.strided = true;
  return info;
}

absl::Status RunCpu(const void* /*impl*/, const KernelInfo& info, const AttentionArgs& args,
                    CUstream_st* /*stream*/) {
  if (absl::Status st = ValidateArgs(args, info); !st.ok()) return st;
  AttentionCpu(args);
  return absl::OkStatus();
}

}  // namespace

absl::Status KernelHandle::Run(const AttentionArgs& args, CUstream_st* stream) const {
  return run_(impl_, info_, args, stream);
}

std::vector<KernelInfo> ListKernels() {
  std::vector<KernelInfo> kernels = {CpuKernelInfo()};
  for (KernelInfo& gpu : internal::GpuKernels()) kernels.push_back(std::move(gpu));
  return kernels;
}

std::vector<KernelInfo> ListTuningCandidates() { return internal::GpuTuningCandidates(); }

absl::StatusOr<KernelHandle> ResolveKernel(absl::string_view name) {
  if (name == kCpuKernelName) return KernelHandle(CpuKernelInfo(), &RunCpu, nullptr);
  absl::StatusOr<KernelHandle> gpu = internal::ResolveGpuKernel(name);
  if (gpu.ok() || gpu.status().code() != absl::StatusCode::kNotFound) return gpu;
  return absl::NotFoundError(absl::StrCat(
      "kernel '", name, "' is unknown; known kernels: ",
      absl::StrJoin(ListKernels(), ", ",
                    [](std::string* out, const KernelInfo& k) { out->append(k.name); })));
}

absl::StatusOr<KernelInfo> FindKernel(absl::string_view name) {
  absl::StatusOr<KernelHandle> handle = ResolveKernel(name);
  if (!handle.ok()) return handle.status();
  return handle->info();
}

KernelInfo DefaultKernel() {
  if (!ListCudaDevices().empty()) {
    absl::StatusOr<KernelHandle> production = internal::ResolveGpuKernel(kProductionKernelName);
    if (production.ok()) return production->info();
  }
  return CpuKernelInfo();
}

absl::Status Forward(const AttentionArgs& args, absl::string_view kernel_name,
                     CUstream_st* stream) {
  absl::StatusOr<KernelHandle> kernel = ResolveKernel(kernel_name);
  if (!kernel.ok()) return kernel.status();
  return kernel->Run(args, stream);
}

}  // namespace attn
