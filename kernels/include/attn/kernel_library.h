// attn/kernel_library.h
//
// How a library of kernels joins the registry of attn/attention.h.
// attn::kernels registers its own (the CPU reference and flash_fwd); another
// library (attn::ladder) is registered by an explicit call its users make
// (attn::ladder::Register()): static registration from a static library is
// fragile, since the linker drops objects nothing references.
//
// Registration is process-wide and permanent; registering the same library
// twice is a no-op. ListKernels lists registered libraries in registration
// order, and resolution asks them in that order.
#ifndef ATTN_KERNEL_LIBRARY_H_
#define ATTN_KERNEL_LIBRARY_H_

#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "attn/attention.h"
#include "attn/device.h"

namespace attn {

class KernelLibrary {
 public:
  virtual ~KernelLibrary() = default;

  // The kernels it lists, in order, described for the calling thread's
  // current device (a CPU-only build lists none of its CUDA kernels).
  virtual std::vector<KernelInfo> List() const = 0;
  // Kernels runnable by name but not listed (tuning candidates).
  virtual std::vector<KernelInfo> Candidates() const { return {}; }
  // The kernel `name` for `device` (null: the calling thread's current
  // device at each launch). NOT_FOUND when the library has no kernel of
  // that name, so the registry asks the next one; FAILED_PRECONDITION when
  // it has, but this build or that device cannot run it.
  virtual absl::StatusOr<KernelHandle> Resolve(absl::string_view name,
                                               const DeviceInfo* device) const = 0;
};

// Adds `library` (which must live for the rest of the process) to the
// registry. Thread-safe.
void RegisterKernelLibrary(const KernelLibrary* library);

// FAILED_PRECONDITION for a CUDA kernel a library defines but a build
// without CUDA does not have: the same answer from every library.
absl::Status CudaKernelNotBuilt(absl::string_view name);

}  // namespace attn

#endif  // ATTN_KERNEL_LIBRARY_H_
