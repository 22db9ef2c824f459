#include "backends/kernel_catalog.h"

#include <algorithm>
#include <functional>
#include <optional>
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

// `handles` resolved for `device`: a kernel that cannot run there keeps
// its FAILED_PRECONDITION; any other error is the catalog's.
absl::StatusOr<std::vector<absl::StatusOr<KernelHandle>>> BindAll(
    const std::vector<KernelHandle>& handles, const DeviceInfo& device) {
  std::vector<absl::StatusOr<KernelHandle>> bound;
  for (const KernelHandle& handle : handles) {
    absl::StatusOr<KernelHandle> kernel = ResolveKernel(handle.info().name, device);
    if (!kernel.ok() && kernel.status().code() != absl::StatusCode::kFailedPrecondition) {
      return kernel.status();
    }
    bound.push_back(std::move(kernel));
  }
  return bound;
}

// Where `kernel` is in `handles`, if it is one of them.
std::optional<size_t> PositionIn(const std::vector<KernelHandle>& handles,
                                 const KernelHandle* kernel) {
  const std::less<const KernelHandle*> before;
  if (handles.empty() || before(kernel, handles.data()) ||
      !before(kernel, handles.data() + handles.size())) {
    return std::nullopt;
  }
  return static_cast<size_t>(kernel - handles.data());
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
  std::string default_name = kCpuFlashKernelName;
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

absl::StatusOr<KernelCatalog> KernelCatalog::ForCudaDevices(
    absl::Span<const DeviceInfo> devices) {
  absl::StatusOr<KernelCatalog> catalog = ForBackend(Backend::kCuda);
  if (!catalog.ok()) return catalog;
  for (const DeviceInfo& device : devices) {
    DeviceKernels& bound = catalog->devices_.emplace_back();
    bound.ordinal = device.ordinal;
    absl::StatusOr<std::vector<absl::StatusOr<KernelHandle>>> kernels =
        BindAll(catalog->kernels_, device);
    if (!kernels.ok()) return kernels.status();
    bound.kernels = *std::move(kernels);
    absl::StatusOr<std::vector<absl::StatusOr<KernelHandle>>> candidates =
        BindAll(catalog->candidates_, device);
    if (!candidates.ok()) return candidates.status();
    bound.candidates = *std::move(candidates);
  }
  return catalog;
}

absl::StatusOr<const KernelHandle*> KernelCatalog::OnDevice(const KernelHandle& kernel,
                                                           int ordinal) const {
  const DeviceKernels* device = OfDevice(ordinal);
  if (device == nullptr) {
    return absl::FailedPreconditionError(absl::StrFormat(
        "the kernel catalog resolved no kernel for device %d (ForCudaDevices)", ordinal));
  }
  const absl::StatusOr<KernelHandle>* bound = nullptr;
  if (const std::optional<size_t> i = PositionIn(kernels_, &kernel); i.has_value()) {
    bound = &device->kernels[*i];
  } else if (const std::optional<size_t> j = PositionIn(candidates_, &kernel); j.has_value()) {
    bound = &device->candidates[*j];
  } else {
    return absl::InvalidArgumentError(
        absl::StrCat("kernel '", kernel.info().name, "' is not a handle of this catalog"));
  }
  if (!bound->ok()) return bound->status();
  return &**bound;
}

const KernelCatalog::DeviceKernels* KernelCatalog::OfDevice(int ordinal) const {
  for (const DeviceKernels& d : devices_) {
    if (d.ordinal == ordinal) return &d;
  }
  return nullptr;
}

int64_t KernelCatalog::MaxWorkspaceBytes(int ordinal) const {
  const DeviceKernels* device = OfDevice(ordinal);
  if (device == nullptr) return 0;
  int64_t most = 0;
  for (const auto* list : {&device->kernels, &device->candidates}) {
    for (const absl::StatusOr<KernelHandle>& bound : *list) {
      if (bound.ok()) most = std::max(most, bound->MaxWorkspaceBytes());
    }
  }
  return most;
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
