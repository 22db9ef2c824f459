// A build without CUDA: no devices, and flash_fwd known by name only, so
// asking for it says it is a CUDA kernel this build does not have.
#include "absl/strings/str_cat.h"
#include "attn/attention.h"
#include "attn/device.h"
#include "attn/kernel_library.h"
#include "builtin_libraries.h"

namespace attn {

bool BuiltWithCuda() { return false; }

absl::StatusOr<DeviceInfo> GetCudaDevice(int ordinal) {
  return absl::FailedPreconditionError(
      absl::StrCat("CUDA device ", ordinal, ": this build has no CUDA"));
}

std::vector<DeviceInfo> ListCudaDevices() { return {}; }

namespace internal {
namespace {

class NoGpuLibrary : public KernelLibrary {
 public:
  std::vector<KernelInfo> List() const override { return {}; }
  absl::StatusOr<KernelHandle> Resolve(absl::string_view name,
                                       const DeviceInfo*) const override {
    if (name == kProductionKernelName) return CudaKernelNotBuilt(name);
    return absl::NotFoundError(name);
  }
};

}  // namespace

const KernelLibrary& ProductionGpuLibrary() {
  static const NoGpuLibrary* library = new NoGpuLibrary;
  return *library;
}

}  // namespace internal
}  // namespace attn
