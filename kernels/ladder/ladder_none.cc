// attn/ladder.h in a build without CUDA: the ladder's names are known, so
// asking for one says it is a CUDA kernel this build does not have.
#include <string>
#include <vector>

#include "attn/kernel_library.h"
#include "attn/ladder.h"

namespace attn::ladder {
namespace {

class LadderNames : public KernelLibrary {
 public:
  std::vector<KernelInfo> List() const override { return {}; }
  absl::StatusOr<KernelHandle> Resolve(absl::string_view name,
                                       const DeviceInfo*) const override {
    static const char* const kNames[] = {
#define ATTN_STEP(step, name, description) name,
#define ATTN_KERNEL(name, step, family, config, description) name,
#include "ladder_table.inc"
#undef ATTN_STEP
#undef ATTN_KERNEL
    };
    for (const char* known : kNames) {
      if (name == known) return CudaKernelNotBuilt(name);
    }
    return absl::NotFoundError(name);
  }
};

}  // namespace

void Register() {
  static const LadderNames* library = new LadderNames;
  RegisterKernelLibrary(library);
}

}  // namespace attn::ladder
