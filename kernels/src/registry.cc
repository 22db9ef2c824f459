// The kernel registry and Forward(): the CPU reference plus whatever the GPU
// seam (gpu_kernels.h) provides, looked up by name.
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
  info.description = "CPU reference: fp32 accumulation, tiled online softmax, multi-threaded";
  info.backend = Backend::kCpu;
  info.head_dim = 0;
  info.seq_multiple = 1;
  return info;
}

}  // namespace

std::vector<KernelInfo> ListKernels() {
  std::vector<KernelInfo> kernels = {CpuKernelInfo()};
  for (KernelInfo& gpu : internal::GpuKernels()) kernels.push_back(std::move(gpu));
  return kernels;
}

std::vector<KernelInfo> ListTuningCandidates() { return internal::GpuTuningCandidates(); }

absl::StatusOr<KernelInfo> FindKernel(absl::string_view name) {
  std::vector<KernelInfo> kernels = ListKernels();
  for (KernelInfo& kernel : kernels) {
    if (kernel.name == name) return std::move(kernel);
  }
  for (KernelInfo& candidate : ListTuningCandidates()) {
    if (candidate.name == name) return std::move(candidate);
  }
  return absl::NotFoundError(absl::StrCat(
      "kernel '", name, "' is unknown; known kernels: ",
      absl::StrJoin(kernels, ", ",
                    [](std::string* out, const KernelInfo& k) { out->append(k.name); })));
}

KernelInfo DefaultKernel() {
  std::vector<KernelInfo> gpu = internal::GpuKernels();
  if (!gpu.empty() && !ListCudaDevices().empty()) return gpu.back();
  return CpuKernelInfo();
}

absl::Status Forward(const AttentionArgs& args, absl::string_view kernel_name,
                     CUstream_st* stream) {
  absl::StatusOr<KernelInfo> kernel = FindKernel(kernel_name);
  if (!kernel.ok()) return kernel.status();
  if (absl::Status st = ValidateArgs(args, *kernel); !st.ok()) return st;
  if (kernel->backend == Backend::kCpu) {
    AttentionCpu(args);
    return absl::OkStatus();
  }
  return internal::LaunchGpuKernel(*kernel, args, stream);
}

}  // namespace attn
