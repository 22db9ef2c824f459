// server/kernel_catalog.h
//
// KernelCatalog: the kernels one backend of this server can run, and which
// one a request gets. Built once at start-up; immutable and thread-safe.
//
// Selection for AttendRequest.kernel:
//   named  -> that kernel (NOT_FOUND if unknown; FAILED_PRECONDITION if it
//             belongs to the other backend), if the shape meets its rules
//             (INVALID_ARGUMENT naming the field and the rule otherwise);
//   empty  -> the backend's default kernel if it accepts the shape, else the
//             highest ladder step that does; if none does, INVALID_ARGUMENT
//             with the default kernel's rule.
#ifndef ATTN_SERVER_KERNEL_CATALOG_H_
#define ATTN_SERVER_KERNEL_CATALOG_H_

#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "attn/attention.h"

namespace attn::server {

// "cpu" or "cuda".
absl::string_view BackendName(Backend backend);

// Whether `kernel` can run `shape` (head_dim, seq_len multiple, grid
// limits); INVALID_ARGUMENT naming the field and the rule otherwise.
absl::Status CheckShapeForKernel(const Shape& shape, const KernelInfo& kernel);

class KernelCatalog {
 public:
  // The kernels of `backend` in this build, in ladder order. The CPU
  // backend's default is the CPU reference; CUDA's is attn::DefaultKernel().
  // FAILED_PRECONDITION when the build has no kernel for `backend`.
  static absl::StatusOr<KernelCatalog> ForBackend(Backend backend);

  Backend backend() const { return backend_; }
  const std::vector<KernelInfo>& kernels() const { return kernels_; }
  const KernelInfo& default_kernel() const { return default_kernel_; }

  // The kernel a request with `name` ("" = default) and `shape` runs.
  absl::StatusOr<KernelInfo> Resolve(absl::string_view name, const Shape& shape) const;

 private:
  Backend backend_ = Backend::kCpu;
  std::vector<KernelInfo> kernels_;
  KernelInfo default_kernel_;
};

}  // namespace attn::server

#endif  // ATTN_SERVER_KERNEL_CATALOG_H_
