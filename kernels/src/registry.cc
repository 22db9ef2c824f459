// The kernel registry (attn/attention.h, attn/kernel_library.h): the CPU
// reference, the libraries registered by their users, and the production GPU
// kernel, asked in that order; Forward() over it.
#include <algorithm>
#include <mutex>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "attn/attention.h"
#include "attn/device.h"
#include "attn/kernel_library.h"
#include "builtin_libraries.h"

namespace attn {
namespace {

struct Registered {
  std::mutex mu;
  std::vector<const KernelLibrary*> libraries;
};

Registered& Registry() {
  static Registered* registry = new Registered;
  return *registry;
}

// In listing and resolution order.
std::vector<const KernelLibrary*> Libraries() {
  std::vector<const KernelLibrary*> libraries = {&internal::CpuKernelLibrary()};
  {
    Registered& r = Registry();
    std::lock_guard<std::mutex> lock(r.mu);
    libraries.insert(libraries.end(), r.libraries.begin(), r.libraries.end());
  }
  libraries.push_back(&internal::ProductionGpuLibrary());
  return libraries;
}

absl::StatusOr<KernelHandle> Resolve(absl::string_view name, const DeviceInfo* device) {
  for (const KernelLibrary* library : Libraries()) {
    absl::StatusOr<KernelHandle> kernel = library->Resolve(name, device);
    if (kernel.ok() || kernel.status().code() != absl::StatusCode::kNotFound) return kernel;
  }
  return absl::NotFoundError(absl::StrCat(
      "kernel '", name, "' is unknown; known kernels: ",
      absl::StrJoin(ListKernels(), ", ",
                    [](std::string* out, const KernelInfo& k) { out->append(k.name); })));
}

}  // namespace

void RegisterKernelLibrary(const KernelLibrary* library) {
  Registered& r = Registry();
  std::lock_guard<std::mutex> lock(r.mu);
  if (std::find(r.libraries.begin(), r.libraries.end(), library) == r.libraries.end()) {
    r.libraries.push_back(library);
  }
}

absl::Status CudaKernelNotBuilt(absl::string_view name) {
  return absl::FailedPreconditionError(absl::StrCat(
      "kernel '", name, "' is a CUDA kernel, and this build has no CUDA (a CPU-only build)"));
}

std::vector<KernelInfo> ListKernels() {
  std::vector<KernelInfo> kernels;
  for (const KernelLibrary* library : Libraries()) {
    for (KernelInfo& info : library->List()) kernels.push_back(std::move(info));
  }
  return kernels;
}

std::vector<KernelInfo> ListTuningCandidates() {
  std::vector<KernelInfo> kernels;
  for (const KernelLibrary* library : Libraries()) {
    for (KernelInfo& info : library->Candidates()) kernels.push_back(std::move(info));
  }
  return kernels;
}

absl::StatusOr<KernelHandle> ResolveKernel(absl::string_view name) {
  return Resolve(name, nullptr);
}

absl::StatusOr<KernelHandle> ResolveKernel(absl::string_view name, const DeviceInfo& device) {
  return Resolve(name, &device);
}

absl::StatusOr<KernelInfo> FindKernel(absl::string_view name) {
  absl::StatusOr<KernelHandle> handle = ResolveKernel(name);
  if (!handle.ok()) return handle.status();
  return handle->info();
}

KernelInfo DefaultKernel() {
  if (!ListCudaDevices().empty()) {
    absl::StatusOr<KernelHandle> production =
        internal::ProductionGpuLibrary().Resolve(kProductionKernelName, nullptr);
    if (production.ok()) return production->info();
  }
  return *FindKernel(kCpuKernelName);
}

absl::Status Forward(const AttentionArgs& args, absl::string_view kernel_name,
                     CUstream_st* stream) {
  absl::StatusOr<KernelHandle> kernel = ResolveKernel(kernel_name);
  if (!kernel.ok()) return kernel.status();
  return kernel->Run(args, stream);
}

}  // namespace attn
