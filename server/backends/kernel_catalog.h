// server/backends/kernel_catalog.h
//
// KernelCatalog: the kernels one backend of this server can run, each
// resolved once (at start-up) into an attn::KernelHandle, and which one a
// request gets. Immutable and thread-safe once built; handles it returns
// stay valid as long as the catalog (the server's Runtime) lives.
//
// Selection for AttendRequest.kernel:
//   named  -> that kernel (NOT_FOUND if unknown; FAILED_PRECONDITION if it
//             belongs to the other backend);
//   empty  -> the backend's default: the production kernel ("flash_fwd",
//             every feature) on CUDA, "cpu_reference" on the CPU.
// Either way the kernel library's rules (attn::ValidateProblem: dimensions,
// head_dim, seq_len multiple, causal, window, GQA, LSE, varlen, ...) decide
// whether the kernel can run the problem: INVALID_ARGUMENT naming the field
// and the rule otherwise. A CUDA kernel asked of a build without CUDA is
// FAILED_PRECONDITION too.
//
// The kernels are attn::kernels' (cpu_reference, flash_fwd) and, when the
// server is built with ATTN_SERVER_LADDER (server/CMakeLists.txt, default
// ON), the FA2 ladder's (attn::ladder: its steps listed, its tuning
// candidates runnable by name).
//
// Per device (ForCudaDevices): every kernel is also resolved for each
// device, so an executor launches the handle bound to its own device
// (OnDevice) with KernelHandle::Launch, which repeats none of the checks
// admission made.
#ifndef ATTN_SERVER_KERNEL_CATALOG_H_
#define ATTN_SERVER_KERNEL_CATALOG_H_

#include <cstddef>
#include <cstdint>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/types/span.h"
#include "attn/attention.h"
#include "attn/device.h"

namespace attn::server {

// "cpu" or "cuda".
absl::string_view BackendName(Backend backend);

class KernelCatalog {
 public:
  // The kernels of `backend` in this build, in ListKernels order (plus, on
  // CUDA, the tuning candidates, runnable by name but not listed). The
  // default is the CPU reference on the CPU backend, the production kernel
  // on CUDA (the last listed CUDA kernel in a build without it).
  // FAILED_PRECONDITION when the build has no kernel for `backend`.
  static absl::StatusOr<KernelCatalog> ForBackend(Backend backend);

  // ForBackend(Backend::kCuda), with every kernel (tuning candidates too)
  // also resolved for each of `devices` (as ListCudaDevices returns them):
  // the family it runs there chosen, the device's facts cached and the
  // launch attributes of every variant set on it, here, once.
  static absl::StatusOr<KernelCatalog> ForCudaDevices(absl::Span<const DeviceInfo> devices);

  // A catalog of the given kernels of `backend` (e.g. synthetic ones in
  // tests); the default is the one named `default_name`.
  static absl::StatusOr<KernelCatalog> FromKernels(Backend backend,
                                                   std::vector<KernelHandle> kernels,
                                                   absl::string_view default_name);

  KernelCatalog() = default;
  // Handles are referred to by address: moves keep them, copies would not.
  KernelCatalog(KernelCatalog&&) = default;
  KernelCatalog& operator=(KernelCatalog&&) = default;
  KernelCatalog(const KernelCatalog&) = delete;
  KernelCatalog& operator=(const KernelCatalog&) = delete;

  Backend backend() const { return backend_; }
  // The listed kernels (ListKernels), in order.
  const std::vector<KernelHandle>& kernels() const { return kernels_; }
  const KernelHandle& default_kernel() const { return kernels_[default_index_]; }
  // The smallest head_dim any listed kernel accepts (1 when one takes any):
  // with the token limit, it bounds rows per request (LSE, sequences).
  int64_t MinHeadDim() const;

  // The kernel a request naming `name` ("" = the default) runs, once
  // attn::ValidateProblem accepted `problem` for it. (Pointers, strides and
  // device offsets are checked by KernelHandle::Run at launch.)
  absl::StatusOr<const KernelHandle*> Resolve(absl::string_view name,
                                              const AttentionProblem& problem) const;

  // The handle of `kernel` (one Resolve or default_kernel() returned)
  // bound to device `ordinal`, to launch there. FAILED_PRECONDITION when
  // the kernel cannot run on that device or the catalog was not made for
  // it (ForCudaDevices); INVALID_ARGUMENT for a handle of another catalog.
  absl::StatusOr<const KernelHandle*> OnDevice(const KernelHandle& kernel, int ordinal) const;

  // The most workspace (KernelHandle::MaxWorkspaceBytes) any kernel bound
  // to device `ordinal` uses: what each of its executors preallocates, so
  // every launch there gets the splits its kernel chooses. 0 for a device
  // the catalog was not made for.
  int64_t MaxWorkspaceBytes(int ordinal) const;

 private:
  // One device's handles, by position in kernels_ and candidates_.
  struct DeviceKernels {
    int ordinal = 0;
    std::vector<absl::StatusOr<KernelHandle>> kernels, candidates;
  };

  const KernelHandle* Find(absl::string_view name) const;
  // The handles bound to device `ordinal`; null when none were made for it.
  const DeviceKernels* OfDevice(int ordinal) const;

  Backend backend_ = Backend::kCpu;
  std::vector<KernelHandle> kernels_;     // listed
  std::vector<KernelHandle> candidates_;  // runnable by name, not listed
  size_t default_index_ = 0;
  std::vector<DeviceKernels> devices_;  // ForCudaDevices
};

}  // namespace attn::server

#endif  // ATTN_SERVER_KERNEL_CATALOG_H_
