#include "kernel_catalog.h"

#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

namespace attn::server {
namespace {

// CUDA limits grid dimensions y and z (heads and batch) to 65535.
constexpr int64_t kMaxGridYZ = 65535;

}  // namespace

absl::string_view BackendName(Backend backend) {
  return backend == Backend::kCuda ? "cuda" : "cpu";
}

absl::Status CheckShapeForKernel(const Shape& shape, const KernelInfo& kernel) {
  if (kernel.head_dim != 0 && shape.head_dim != kernel.head_dim) {
    return absl::InvalidArgumentError(
        absl::StrFormat("shape.head_dim is %d; kernel '%s' supports only head_dim %d",
                        shape.head_dim, kernel.name, kernel.head_dim));
  }
  if (kernel.head_dim == 0 && shape.head_dim > kMaxCpuHeadDim) {
    return absl::InvalidArgumentError(
        absl::StrFormat("shape.head_dim is %d; kernel '%s' supports head_dim up to %d",
                        shape.head_dim, kernel.name, kMaxCpuHeadDim));
  }
  if (kernel.seq_multiple > 1 && shape.seq_len % kernel.seq_multiple != 0) {
    return absl::InvalidArgumentError(
        absl::StrFormat("shape.seq_len is %d; kernel '%s' needs a multiple of %d (its block size)",
                        shape.seq_len, kernel.name, kernel.seq_multiple));
  }
  if (kernel.backend == Backend::kCuda) {
    if (shape.batch > kMaxGridYZ) {
      return absl::InvalidArgumentError(
          absl::StrFormat("shape.batch is %d; kernel '%s' supports at most %d", shape.batch,
                          kernel.name, kMaxGridYZ));
    }
    if (shape.num_heads > kMaxGridYZ) {
      return absl::InvalidArgumentError(
          absl::StrFormat("shape.num_heads is %d; kernel '%s' supports at most %d", shape.num_heads,
                          kernel.name, kMaxGridYZ));
    }
  }
  return absl::OkStatus();
}

absl::StatusOr<KernelCatalog> KernelCatalog::ForBackend(Backend backend) {
  KernelCatalog catalog;
  catalog.backend_ = backend;
  for (KernelInfo& kernel : ListKernels()) {
    if (kernel.backend == backend) catalog.kernels_.push_back(std::move(kernel));
  }
  if (catalog.kernels_.empty()) {
    return absl::FailedPreconditionError(
        absl::StrCat("this build has no kernels for the ", BackendName(backend), " backend"));
  }
  if (backend == Backend::kCpu) {
    absl::StatusOr<KernelInfo> cpu = FindKernel(kCpuKernelName);
    if (!cpu.ok()) return cpu.status();
    catalog.default_kernel_ = *std::move(cpu);
  } else {
    KernelInfo preferred = DefaultKernel();
    if (preferred.backend != Backend::kCuda) preferred = catalog.kernels_.back();
    catalog.default_kernel_ = std::move(preferred);
  }
  return catalog;
}

absl::StatusOr<KernelInfo> KernelCatalog::Resolve(absl::string_view name,
                                                  const Shape& shape) const {
  if (!name.empty()) {
    absl::StatusOr<KernelInfo> kernel = FindKernel(name);
    if (!kernel.ok()) return kernel.status();
    if (kernel->backend != backend_) {
      return absl::FailedPreconditionError(absl::StrFormat(
          "kernel is '%s', a %s kernel; this server runs the %s backend (--backend), whose "
          "kernels are listed by ListKernels",
          name, BackendName(kernel->backend), BackendName(backend_)));
    }
    if (absl::Status fits = CheckShapeForKernel(shape, *kernel); !fits.ok()) return fits;
    return kernel;
  }
  const absl::Status default_fits = CheckShapeForKernel(shape, default_kernel_);
  if (default_fits.ok()) return default_kernel_;
  for (auto it = kernels_.rbegin(); it != kernels_.rend(); ++it) {
    if (CheckShapeForKernel(shape, *it).ok()) return *it;
  }
  return absl::InvalidArgumentError(absl::StrCat(default_fits.message(), "; no kernel of the ",
                                                 BackendName(backend_), " backend accepts shape ",
                                                 shape.ToString()));
}

}  // namespace attn::server
