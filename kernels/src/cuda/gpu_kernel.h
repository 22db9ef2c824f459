// GpuKernel: one GPU kernel of any attn kernel library (flash_fwd here, the
// ladder's steps in kernels/ladder/) as compiled tiles in kernel families,
// resolved into KernelHandles: bound to a device (its family chosen, every
// variant's launch attributes set there, once) or to the calling thread's
// current device at each launch. Host code only.
#ifndef ATTN_KERNELS_SRC_CUDA_GPU_KERNEL_H_
#define ATTN_KERNELS_SRC_CUDA_GPU_KERNEL_H_

#include <array>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "attn/attention.h"
#include "attn/device.h"
#include "attn/kernel_family.h"
#include "kernel_families_built.h"
#include "launch.h"

namespace attn::fa2 {

// Whether this build compiled the family whose ATTN_FAMILY_ARCHS_<family>
// (kernel_families_built.h) is `architectures`.
constexpr bool FamilyBuilt(const char* architectures) { return architectures[0] != '\0'; }

// Handles index tiles by head_dim in steps of kHeadDimStep up to
// kMaxGpuHeadDim (the kernel loads 16-byte chunks of 8 elements).
inline constexpr int kHeadDimStep = 8;
inline constexpr int kMaxGpuHeadDim = 256;

// One compiled configuration of the kernel template.
struct GpuTile {
  int head_dim = 0;
  int block_m = 0;
  int block_n = 0;
  int num_warps = 0;
  Launchers launchers;
};

template <class Cfg>
GpuTile TileOf(const Launchers& launchers) {
  static_assert(Cfg::kHeadDim % kHeadDimStep == 0 && Cfg::kHeadDim <= kMaxGpuHeadDim,
                "a tile's head_dim must fit GpuKernel's index by head_dim");
  return {Cfg::kHeadDim, Cfg::kBlockM, Cfg::kBlockN, Cfg::kNumWarps, launchers};
}

// One compiled decode configuration (GQA-packed rows, split-KV).
struct GpuDecodeTile {
  int head_dim = 0;
  int block_m = 0;  // packed rows per CTA
  int block_n = 0;
  DecodeLaunchers launchers;
};

// Problems whose (longest) query sequence has at most this many rows run
// the decode tile of their head_dim, where the family has one: decode,
// speculative decode, small chunks of prefill.
inline constexpr int kDecodeMaxSeqlenQ = 16;

// A kernel's tiles in one family, as its table rows list them; no tiles
// when this build did not compile the family.
struct FamilyTiles {
  const KernelFamily* family = nullptr;
  std::vector<GpuTile> tiles;
  std::vector<GpuDecodeTile> decode_tiles;
};

// Adds `tile` (none for a family not built) to family `family`'s entry of
// `families`, making it on first use.
void AddFamilyTile(std::vector<FamilyTiles>* families, absl::string_view family,
                   std::optional<GpuTile> tile);
void AddFamilyDecodeTile(std::vector<FamilyTiles>* families, absl::string_view family,
                         std::optional<GpuDecodeTile> tile);

// An ATTN_DECODE row's tile, expanded only where its family was compiled.
template <bool kBuilt, class Cfg>
void AddDecodeRow(std::vector<FamilyTiles>* families, absl::string_view family) {
  if constexpr (!kBuilt) {
    AddFamilyDecodeTile(families, family, std::nullopt);
  } else {
    static_assert(Cfg::kHeadDim % kHeadDimStep == 0 && Cfg::kHeadDim <= kMaxGpuHeadDim,
                  "a tile's head_dim must fit GpuKernel's index by head_dim");
    AddFamilyDecodeTile(families, family,
                        GpuDecodeTile{Cfg::kHeadDim, Cfg::kBlockM, Cfg::kBlockN,
                                      AllDecodeLaunchers<Cfg>()});
  }
}

// Which variants a table row instantiates (launch.cuh's ATTN_INSTANTIATE_*).
enum class RowVariants { kLadder, kAll };

// A table row's tile, expanded only where its family was compiled, so a
// build never names a launcher it does not have.
template <bool kBuilt, class Cfg, RowVariants kVariants>
void AddRow(std::vector<FamilyTiles>* families, absl::string_view family) {
  if constexpr (!kBuilt) {
    AddFamilyTile(families, family, std::nullopt);
  } else if constexpr (kVariants == RowVariants::kAll) {
    AddFamilyTile(families, family, TileOf<Cfg>(AllLaunchers<Cfg>()));
  } else {
    AddFamilyTile(families, family, TileOf<Cfg>(LadderLaunchers<Cfg>()));
  }
}

class GpuKernel {
 public:
  explicit GpuKernel(std::vector<FamilyTiles> families);
  GpuKernel(const GpuKernel&) = delete;
  GpuKernel& operator=(const GpuKernel&) = delete;

  // Whether this build compiled it in any family.
  bool built() const { return !built_.empty(); }

  // `base` (name, ladder step, description, the features of caps) completed
  // for the family the calling thread's current device runs (the most
  // portable one on a host without a device): backend, family, head_dims, the
  // tile at head_dim 128 (or the first), seq_multiple for even-only tiles,
  // the minimum compute capability. FAILED_PRECONDITION when not built.
  absl::StatusOr<KernelInfo> Describe(KernelInfo base) const;

  // A handle described by Describe(base) for `device` (null: for the
  // current device now, run on the current device at each launch).
  // FAILED_PRECONDITION when not built or no family runs on `device`.
  absl::StatusOr<KernelHandle> Resolve(KernelInfo base, const DeviceInfo* device) const;

 private:
  using HeadDimIndex = std::array<int8_t, kMaxGpuHeadDim / kHeadDimStep + 1>;  // -1: none
  // A family's tiles with an index by head_dim (no search per launch).
  struct Family {
    const KernelFamily* family;
    std::vector<GpuTile> tiles;
    std::vector<GpuDecodeTile> decode_tiles;
    HeadDimIndex by_head_dim;
    HeadDimIndex decode_by_head_dim;
    const GpuTile* ForHeadDim(int64_t head_dim) const;
    // The index of the decode tile for head_dim, -1 when none.
    int DecodeIndex(int64_t head_dim) const;
  };
  // The kernel bound to one device: what a launch there reads.
  struct OnDevice {
    const Family* family;
    int ordinal;
    bool dependent_launch;  // compute capability 9.0+: programmatic dependent launch
    // CTAs of each decode tile (by position in family->decode_tiles) the
    // device runs at once: SMs × resident CTAs per SM.
    std::vector<int> decode_slots;
    // The next best family on this device, for the problems this one has
    // no tile for (or whose tensors its launch cannot address); null: none.
    const OnDevice* next;
  };
  // Whether `family` has a tile for `problem`: a decode tile for K/V caches
  // and few query rows, else a prefill tile for its head_dim.
  static bool Takes(const Family& family, const AttentionProblem& problem);
  // Of `bound` and the families after it, the first that takes `problem`
  // (the last one when none does).
  static const OnDevice& Serving(const OnDevice& bound, const AttentionProblem& problem);
  // How one call runs its decode tile: the tile and the split count.
  struct DecodePlan {
    const GpuDecodeTile* tile = nullptr;  // null: the prefill tiles
    int splits = 1;
  };
  // `workspace_bytes`: the scratch given (the kernel's own choice of splits
  // is kept within it); `forced`: args.num_splits.
  static DecodePlan PlanDecode(const OnDevice& bound, const AttentionProblem& problem,
                               int forced, int64_t workspace_bytes);

  static int64_t WorkspaceBound(const void* impl, const AttentionProblem& problem);
  static int64_t WorkspaceHere(const void* impl, const AttentionProblem& problem);
  static int64_t MaxWorkspaceBound(const void* impl);
  static int64_t MaxWorkspaceHere(const void* impl);
  // The kernel bound to the calling thread's current device; null when
  // there is none or no family of it runs there.
  static const OnDevice* BoundHere(const void* impl);

  const Family* BestFor(const DeviceInfo& device) const;
  // `base` described for `families` (best first; each serves what the ones
  // before it have no tile for).
  static KernelInfo DescribeFamilies(KernelInfo base, const std::vector<const Family*>& families);
  // The families that run on a device of `compute_capability`, best first.
  std::vector<const Family*> ChainFor(int compute_capability) const;
  absl::Status NotOn(const KernelInfo& info, const DeviceInfo& device) const;
  // The kernel on `device`, its variants prepared there on first use; null
  // when none of its families runs there.
  absl::StatusOr<const OnDevice*> Bind(const DeviceInfo& device) const;
  absl::StatusOr<const OnDevice*> BindLocked(const DeviceInfo& device, const Family* family) const;

  static absl::Status LaunchBound(const void* impl, const KernelInfo& info,
                                  const AttentionArgs& args, CUstream_st* stream);
  static absl::Status LaunchHere(const void* impl, const KernelInfo& info,
                                 const AttentionArgs& args, CUstream_st* stream);
  static absl::Status CheckBound(const void* impl, const KernelInfo& info,
                                 const AttentionArgs& args);
  static absl::Status CheckHere(const void* impl, const KernelInfo& info,
                                const AttentionArgs& args);

  std::vector<Family> built_;
  std::vector<std::string> not_built_;  // families named by its rows that this build skipped
  mutable std::mutex mu_;
  mutable std::map<std::pair<int, const Family*>, std::unique_ptr<const OnDevice>> bound_;
};

// The calling thread's current CUDA device; FAILED_PRECONDITION when no
// device is visible.
absl::StatusOr<DeviceInfo> CurrentCudaDevice();

}  // namespace attn::fa2

#endif  // ATTN_KERNELS_SRC_CUDA_GPU_KERNEL_H_
