#include "backends/kernel_catalog.h"

#include <algorithm>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "attn/validate.h"
#if ATTN_SERVER_LADDER
#include "attn/ladder.h"
#endif

namespace attn::server {
namespace {

// The kernel libraries this server links beside attn::kernels
// (ATTN_SERVER_LADDER in server/CMakeLists.txt), in the registry before
// the catalog lists it.
void RegisterKernelLibraries() {
#if ATTN_SERVER_LADDER
  ladder::Register();
#endif
}

}  // namespace

absl::string_view BackendName(Backend backend) {
  return backend == Backend::kCuda ? "cuda" : "cpu";
}

absl::StatusOr<KernelCatalog> KernelCatalog::FromKernels(Backend backend,
                                                         std::vector<KernelHandle> kernels,
                                                         absl::string_view default_name) {
  KernelCatalog catalog;
  catalog.backend_ = backend;
  catalog.kernels_ = std::move(kernels);
  if (catalog.kernels_.empty()) {
    return absl::FailedPreconditionError(
        absl::StrCat("this build has no kernels for the ", BackendName(backend), " backend"));
  }
  for (size_t i = 0; i < catalog.kernels_.size(); ++i) {
    const KernelInfo& info = catalog.kernels_[i].info();
    if (info.backend != backend) {
      return absl::InternalError(absl::StrFormat("kernel '%s' is not a %s kernel", info.name,
                                                 BackendName(backend)));
    }
    if (info.name == default_name) catalog.default_index_ = i;
  }
  if (catalog.kernels_[catalog.default_index_].info().name != default_name) {
    return absl::InternalError(absl::StrCat("default kernel '", default_name, "' is not among the ",
                                            BackendName(backend), " kernels"));
  }
  return catalog;
}

absl::StatusOr<KernelCatalog> KernelCatalog::ForBackend(Backend backend) {
  RegisterKernelLibraries();
  std::vector<KernelHandle> kernels;
  for (const KernelInfo& info : ListKernels()) {
    if (info.backend != backend) continue;
    absl::StatusOr<KernelHandle> handle = ResolveKernel(info.name);
    if (!handle.ok()) return handle.status();
    kernels.push_back(*std::move(handle));
  }
  std::string default_name = kCpuKernelName;
  if (backend == Backend::kCuda) {
    const bool has_production =
        std::any_of(kernels.begin(), kernels.end(), [](const KernelHandle& k) {
          return k.info().name == kProductionKernelName;
        });
    default_name = has_production || kernels.empty() ? std::string(kProductionKernelName)
                                                     : kernels.back().info().name;
  }
  absl::StatusOr<KernelCatalog> catalog =
      FromKernels(backend, std::move(kernels), default_name);
  if (!catalog.ok() || backend != Backend::kCuda) return catalog;
  for (const KernelInfo& info : ListTuningCandidates()) {
    absl::StatusOr<KernelHandle> handle = ResolveKernel(info.name);
    if (!handle.ok()) return handle.status();
    catalog->candidates_.push_back(*std::move(handle));
  }
  return catalog;
}

int64_t KernelCatalog::MinHeadDim() const {
  int64_t smallest = 0;
  for (const KernelHandle& kernel : kernels_) {
    const std::vector<int>& dims = kernel.info().caps.head_dims;
    const int64_t least = dims.empty() ? 1 : *std::min_element(dims.begin(), dims.end());
    smallest = smallest == 0 ? least : std::min(smallest, least);
  }
  return std::max<int64_t>(smallest, 1);
}

const KernelHandle* KernelCatalog::Find(absl::string_view name) const {
  for (const std::vector<KernelHandle>* list : {&kernels_, &candidates_}) {
    for (const KernelHandle& kernel : *list) {
      if (kernel.info().name == name) return &kernel;
    }
  }
  return nullptr;
}

absl::StatusOr<const KernelHandle*> KernelCatalog::Resolve(
    absl::string_view name, const AttentionProblem& problem) const {
  const KernelHandle* kernel = name.empty() ? &default_kernel() : Find(name);
  if (kernel == nullptr) {
    // Not ours: another backend's kernel, or unknown (the library's message
    // lists the known names).
    absl::StatusOr<KernelInfo> other = FindKernel(name);
    if (!other.ok()) return other.status();
    return absl::FailedPreconditionError(absl::StrFormat(
        "kernel is '%s', a %s kernel; this server runs the %s backend (--backend), whose "
        "kernels are listed by ListKernels",
        name, BackendName(other->backend), BackendName(backend_)));
  }
  if (absl::Status valid = ValidateProblem(problem, kernel->info()); !valid.ok()) return valid;
  return kernel;
}

}  // namespace attn::server
