// The production GPU kernel flash_fwd as a kernel library of attn::kernels:
// its tiles in each family of kernel_table.inc this build compiled,
// resolved per device (gpu_kernel.h).
#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/match.h"
#include "attn/attention.h"
#include "attn/kernel_library.h"
#include "builtin_libraries.h"
#include "flash_fwd_configs.h"
#include "gpu_kernel.h"

namespace attn {
namespace {

// The kernel's tiles in every family of kernel_table.inc.
std::vector<fa2::FamilyTiles> AllFamilyTiles() {
  std::vector<fa2::FamilyTiles> families;
#define ATTN_FAMILY(family, min_cc, scope, features)
#define ATTN_PRODUCTION(family, config)                                                    \
  fa2::AddRow<fa2::FamilyBuilt(ATTN_FAMILY_ARCHS_##family), fa2::config,                  \
              fa2::RowVariants::kAll>(&families, #family);
#define ATTN_DECODE(family, config) \
  fa2::AddDecodeRow<fa2::FamilyBuilt(ATTN_FAMILY_ARCHS_##family), fa2::config>(&families, #family);
#include "kernel_table.inc"
#undef ATTN_FAMILY
#undef ATTN_PRODUCTION
#undef ATTN_DECODE
  return families;
}

// flash_fwd: on each device the best family there, the next ones serving
// what it has no tile for.
const fa2::GpuKernel& FlashFwd() {
  static const fa2::GpuKernel* kernel = new fa2::GpuKernel(AllFamilyTiles());
  return *kernel;
}

// "flash_fwd@<family>": that family's tiles alone, so tests and benchmarks
// can run each family on a device that would pick another (not listed:
// ListKernels shows the kernel once). Null for a family the table lacks.
const fa2::GpuKernel* FlashFwdIn(absl::string_view family) {
  static const auto* kernels = [] {
    auto* by_family = new std::map<std::string, std::unique_ptr<const fa2::GpuKernel>, std::less<>>;
    for (fa2::FamilyTiles& tiles : AllFamilyTiles()) {
      const std::string name = tiles.family->name;
      std::vector<fa2::FamilyTiles> one;
      one.push_back(std::move(tiles));
      (*by_family)[name] = std::make_unique<const fa2::GpuKernel>(std::move(one));
    }
    return by_family;
  }();
  const auto it = kernels->find(family);
  return it == kernels->end() ? nullptr : it->second.get();
}

KernelInfo BaseInfo() {
  KernelInfo info;
  info.name = kProductionKernelName;
  info.description =
      "production FA2 forward: causal, window, any lengths, GQA/MQA, LSE, varlen, strides; "
      "head_dim 64/96/128/192/256, each with its own tile; up to 16 query rows and K/V "
      "caches (dense or paged, with append): a GQA-packed decode tile with split-KV";
  KernelCapabilities& caps = info.caps;
  caps.causal = caps.window = caps.gqa = caps.seqlen_q_ne_k = caps.lse = caps.varlen =
      caps.strided = caps.kv_cache = true;
  return info;
}

class FlashFwdLibrary : public KernelLibrary {
 public:
  std::vector<KernelInfo> List() const override {
    absl::StatusOr<KernelInfo> info = FlashFwd().Describe(BaseInfo());
    if (!info.ok()) return {};
    return {*std::move(info)};
  }
  absl::StatusOr<KernelHandle> Resolve(absl::string_view name,
                                       const DeviceInfo* device) const override {
    if (name == kProductionKernelName) return FlashFwd().Resolve(BaseInfo(), device);
    const std::string prefix = std::string(kProductionKernelName) + "@";
    if (!absl::StartsWith(name, prefix)) return absl::NotFoundError(name);
    const fa2::GpuKernel* kernel = FlashFwdIn(name.substr(prefix.size()));
    if (kernel == nullptr) return absl::NotFoundError(name);
    KernelInfo info = BaseInfo();
    info.name = std::string(name);
    return kernel->Resolve(std::move(info), device);
  }
};

}  // namespace

namespace internal {

const KernelLibrary& ProductionGpuLibrary() {
  static const FlashFwdLibrary* library = new FlashFwdLibrary;
  return *library;
}

}  // namespace internal
}  // namespace attn
