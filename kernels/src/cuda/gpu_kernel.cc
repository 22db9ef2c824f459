#include "gpu_kernel.h"

#include <cuda_runtime_api.h>

#include <algorithm>
#include <cmath>
#include <limits>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"

namespace attn::fa2 {
namespace {

absl::Status CudaError(cudaError_t err, absl::string_view what) {
  return absl::InternalError(absl::StrCat(what, ": ", cudaGetErrorName(err), " (",
                                          cudaGetErrorString(err), ")"));
}

FwdParams MakeParams(const AttentionArgs& args) {
  const AttentionProblem& pb = args.problem;
  FwdParams p{};
  p.q = args.q;
  p.k = args.k;
  p.v = args.v;
  p.o = args.out;
  p.lse = pb.return_lse ? args.lse : nullptr;
  p.cu_seqlens_q = pb.varlen ? args.cu_seqlens_q : nullptr;
  p.cu_seqlens_k = pb.VarlenKeys() ? args.cu_seqlens_k : nullptr;
  p.q_batch_stride = args.q_strides.batch;
  p.q_row_stride = args.q_strides.row;
  p.q_head_stride = args.q_strides.head;
  p.k_batch_stride = args.k_strides.batch;
  p.k_head_stride = args.k_strides.head;
  p.v_batch_stride = args.v_strides.batch;
  p.v_head_stride = args.v_strides.head;
  p.kv_row_stride = args.k_strides.row;  // ValidateArgs checked v's is the same on GPUs
  p.o_batch_stride = args.out_strides.batch;
  p.o_row_stride = args.out_strides.row;
  p.o_head_stride = args.out_strides.head;
  p.batch = static_cast<int>(pb.batch);
  p.seqlen_q = static_cast<int>(pb.seqlen_q);
  p.seqlen_k = static_cast<int>(pb.seqlen_k);
  p.heads_q = static_cast<int>(pb.heads_q);
  p.heads_per_kv = static_cast<int>(pb.heads_q / pb.heads_kv);
  p.total_q = static_cast<int>(pb.varlen ? pb.total_q : 0);
  p.total_k = static_cast<int>(pb.VarlenKeys() ? pb.total_k : 0);
  p.window_left = static_cast<int>(pb.window_left);
  p.window_right = static_cast<int>(pb.EffectiveWindowRight());
  p.scale = pb.ResolvedScale();
  p.scale_log2 = p.scale * static_cast<float>(M_LOG2E);
  p.num_splits = 1;
  if (pb.kv_cache) {
    p.cache_seqlens = args.cache_seqlens;
    if (pb.Paged()) {
      p.block_table = args.block_table;
      p.block_table_stride = static_cast<int>(pb.max_pages_per_seq);
      p.page_shift = __builtin_ctzll(static_cast<unsigned long long>(pb.page_size));  // a power of two
      p.num_pages = static_cast<int>(pb.num_pages);
    }
    if (pb.append) {
      p.k_new = args.k_new;
      p.v_new = args.v_new;
      p.k_new_batch_stride = args.k_new_strides.batch;
      p.k_new_row_stride = args.k_new_strides.row;
      p.k_new_head_stride = args.k_new_strides.head;
      p.v_new_batch_stride = args.v_new_strides.batch;
      p.v_new_row_stride = args.v_new_strides.row;
      p.v_new_head_stride = args.v_new_strides.head;
    }
  }
  return p;
}

absl::Status CheckDevicePointer(const char* field, const void* ptr) {
  cudaPointerAttributes attr{};
  if (cudaPointerGetAttributes(&attr, ptr) != cudaSuccess) {
    cudaGetLastError();
    return absl::InvalidArgumentError(absl::StrCat(field, " is not a CUDA pointer"));
  }
  if (attr.type != cudaMemoryTypeDevice && attr.type != cudaMemoryTypeManaged) {
    return absl::InvalidArgumentError(
        absl::StrCat(field, " must point to device memory for GPU kernels"));
  }
  return absl::OkStatus();
}

// Every pointer the launch reads or writes is device (or managed) memory.
absl::Status CheckDevicePointers(const AttentionArgs& args) {
  const AttentionProblem& pb = args.problem;
  std::vector<std::pair<const char*, const void*>> pointers = {
      {"q", args.q}, {"k", args.k}, {"v", args.v}, {"out", args.out}};
  if (pb.return_lse) pointers.emplace_back("lse", args.lse);
  if (pb.varlen) pointers.emplace_back("cu_seqlens_q", args.cu_seqlens_q);
  if (pb.VarlenKeys()) pointers.emplace_back("cu_seqlens_k", args.cu_seqlens_k);
  if (pb.kv_cache) pointers.emplace_back("cache_seqlens", args.cache_seqlens);
  if (pb.Paged()) pointers.emplace_back("block_table", args.block_table);
  if (pb.kv_cache && pb.append) {
    pointers.emplace_back("k_new", args.k_new);
    pointers.emplace_back("v_new", args.v_new);
  }
  for (const auto& [field, ptr] : pointers) {
    if (absl::Status st = CheckDevicePointer(field, ptr); !st.ok()) return st;
  }
  return absl::OkStatus();
}

std::string CapabilityName(int compute_capability) {
  return absl::StrFormat("%d.%d", compute_capability / 10, compute_capability % 10);
}

// "ampere needs compute capability 8.0 or newer", for messages.
std::string Requirement(const KernelFamily& family) {
  return absl::StrCat(family.name, " needs compute capability ",
                      CapabilityName(family.min_compute_capability),
                      family.arch_specific ? " exactly" : " or newer");
}

// Sets the launch attributes of every variant of `tiles` and `decode_tiles`
// on device `ordinal`, and measures how many CTAs of each decode tile one
// of its SMs holds (`decode_blocks_per_sm`), leaving the calling thread's
// current device as it was.
absl::Status PrepareOn(const std::vector<GpuTile>& tiles,
                       const std::vector<GpuDecodeTile>& decode_tiles, int ordinal,
                       absl::string_view what, std::vector<int>* decode_blocks_per_sm) {
  int current = 0;
  if (cudaError_t err = cudaGetDevice(&current); err != cudaSuccess) {
    return CudaError(err, "cudaGetDevice");
  }
  if (current != ordinal) {
    if (cudaError_t err = cudaSetDevice(ordinal); err != cudaSuccess) {
      return CudaError(err, absl::StrCat("cudaSetDevice(", ordinal, ")"));
    }
  }
  cudaError_t err = cudaSuccess;
  for (const GpuTile& tile : tiles) {
    for (const auto& by_even : tile.launchers.fn) {
      for (const auto& by_mask : by_even) {
        for (const Variant& variant : by_mask) {
          if (err == cudaSuccess && variant.prepare != nullptr) err = variant.prepare();
        }
      }
    }
  }
  decode_blocks_per_sm->clear();
  for (const GpuDecodeTile& tile : decode_tiles) {
    for (const auto& by_mask : tile.launchers.fn) {
      for (const auto& by_split : by_mask) {
        for (const Variant& variant : by_split) {
          if (err == cudaSuccess && variant.prepare != nullptr) err = variant.prepare();
        }
      }
    }
    const Variant& split = tile.launchers.Get(DType::kBFloat16, false, true);
    decode_blocks_per_sm->push_back(err == cudaSuccess && split.blocks_per_sm != nullptr
                                        ? split.blocks_per_sm()
                                        : 1);
  }
  if (current != ordinal) cudaSetDevice(current);
  if (err != cudaSuccess) {
    return CudaError(err, absl::StrCat("setting the launch attributes of ", what, " on device ",
                                       ordinal));
  }
  return absl::OkStatus();
}

}  // namespace

void AddFamilyTile(std::vector<FamilyTiles>* families, absl::string_view family,
                   std::optional<GpuTile> tile) {
  auto it = std::find_if(families->begin(), families->end(),
                         [&](const FamilyTiles& f) { return f.family->name == family; });
  if (it == families->end()) {
    // Every family name in a table row is one of kernel_table.inc's: the
    // build refuses a row that names another.
    families->push_back({FindKernelFamily(family), {}, {}});
    it = families->end() - 1;
  }
  if (tile.has_value()) it->tiles.push_back(*tile);
}

void AddFamilyDecodeTile(std::vector<FamilyTiles>* families, absl::string_view family,
                         std::optional<GpuDecodeTile> tile) {
  auto it = std::find_if(families->begin(), families->end(),
                         [&](const FamilyTiles& f) { return f.family->name == family; });
  if (it == families->end()) {
    families->push_back({FindKernelFamily(family), {}, {}});
    it = families->end() - 1;
  }
  if (tile.has_value()) it->decode_tiles.push_back(*tile);
}

GpuKernel::GpuKernel(std::vector<FamilyTiles> families) {
  for (FamilyTiles& f : families) {
    if (f.tiles.empty()) {
      not_built_.push_back(f.family->name);
      continue;
    }
    Family family{f.family, std::move(f.tiles), std::move(f.decode_tiles), {}, {}};
    family.by_head_dim.fill(-1);
    family.decode_by_head_dim.fill(-1);
    for (size_t i = 0; i < family.tiles.size(); ++i) {
      family.by_head_dim[family.tiles[i].head_dim / kHeadDimStep] = static_cast<int8_t>(i);
    }
    for (size_t i = 0; i < family.decode_tiles.size(); ++i) {
      family.decode_by_head_dim[family.decode_tiles[i].head_dim / kHeadDimStep] =
          static_cast<int8_t>(i);
    }
    built_.push_back(std::move(family));
  }
  // Best first: the order BestFor's ties keep.
  std::stable_sort(built_.begin(), built_.end(), [](const Family& a, const Family& b) {
    return a.family->min_compute_capability > b.family->min_compute_capability;
  });
}

const GpuTile* GpuKernel::Family::ForHeadDim(int64_t head_dim) const {
  if (head_dim <= 0 || head_dim > kMaxGpuHeadDim || head_dim % kHeadDimStep != 0) return nullptr;
  const int8_t i = by_head_dim[head_dim / kHeadDimStep];
  return i < 0 ? nullptr : &tiles[i];
}

int GpuKernel::Family::DecodeIndex(int64_t head_dim) const {
  if (head_dim <= 0 || head_dim > kMaxGpuHeadDim || head_dim % kHeadDimStep != 0) return -1;
  return decode_by_head_dim[head_dim / kHeadDimStep];
}

const GpuKernel::Family* GpuKernel::BestFor(const DeviceInfo& device) const {
  std::vector<const KernelFamily*> families;
  for (const Family& f : built_) families.push_back(f.family);
  const KernelFamily* best = BestFamily(families, device.ComputeCapability());
  for (const Family& f : built_) {
    if (f.family == best) return &f;
  }
  return nullptr;
}

absl::Status GpuKernel::NotOn(const KernelInfo& info, const DeviceInfo& device) const {
  std::vector<std::string> needs;
  for (const Family& f : built_) needs.push_back(Requirement(*f.family));
  return absl::FailedPreconditionError(absl::StrFormat(
      "kernel '%s' cannot run on device %d (%s, compute capability %s): %s", info.name,
      device.ordinal, device.name, CapabilityName(device.ComputeCapability()),
      absl::StrJoin(needs, "; ")));
}

absl::StatusOr<KernelInfo> GpuKernel::Describe(KernelInfo base) const {
  if (!built()) {
    return absl::FailedPreconditionError(absl::StrFormat(
        "kernel '%s' is in kernel family %s, which this build did not compile "
        "(ATTN_CUDA_ARCHITECTURES has none of its architectures)",
        base.name, absl::StrJoin(not_built_, ", ")));
  }
  // The most portable family, on a host without a device.
  std::vector<const Family*> families = {&built_.back()};
  if (absl::StatusOr<DeviceInfo> device = CurrentCudaDevice(); device.ok()) {
    std::vector<const Family*> chain = ChainFor(device->ComputeCapability());
    if (!chain.empty()) families = std::move(chain);
  }
  return DescribeFamilies(std::move(base), families);
}

std::vector<const GpuKernel::Family*> GpuKernel::ChainFor(int compute_capability) const {
  std::vector<const Family*> chain;
  for (const Family& f : built_) {  // best first
    if (f.family->RunsOn(compute_capability)) chain.push_back(&f);
  }
  return chain;
}

KernelInfo GpuKernel::DescribeFamilies(KernelInfo base,
                                       const std::vector<const Family*>& families) {
  const Family& best = *families.front();
  base.backend = Backend::kCuda;
  base.family = best.family->name;
  KernelCapabilities& caps = base.caps;
  caps.min_compute_capability = families.back()->family->min_compute_capability;
  caps.head_dims.clear();
  for (const Family* family : families) {
    for (const GpuTile& tile : family->tiles) {
      if (std::find(caps.head_dims.begin(), caps.head_dims.end(), tile.head_dim) ==
          caps.head_dims.end()) {
        caps.head_dims.push_back(tile.head_dim);
      }
      // Both block sizes are powers of two: the larger is a multiple of both.
      if (tile.launchers.EvenOnly()) {
        caps.seq_multiple = std::max({caps.seq_multiple, tile.block_m, tile.block_n});
      }
    }
  }
  std::sort(caps.head_dims.begin(), caps.head_dims.end());
  // K/V caches run in the decode tiles only: some family must have one for
  // every head_dim.
  for (int head_dim : caps.head_dims) {
    bool decode = false;
    for (const Family* family : families) decode = decode || family->DecodeIndex(head_dim) >= 0;
    if (!decode) caps.kv_cache = false;
  }
  const GpuTile* reference = best.ForHeadDim(128);
  if (reference == nullptr) reference = &best.tiles.front();
  base.block_m = reference->block_m;
  base.block_n = reference->block_n;
  base.num_warps = reference->num_warps;
  return base;
}

bool GpuKernel::Takes(const Family& family, const AttentionProblem& pb) {
  if (pb.kv_cache || pb.seqlen_q <= kDecodeMaxSeqlenQ) return family.DecodeIndex(pb.head_dim) >= 0;
  return family.ForHeadDim(pb.head_dim) != nullptr;
}

const GpuKernel::OnDevice& GpuKernel::Serving(const OnDevice& bound, const AttentionProblem& pb) {
  const OnDevice* on = &bound;
  while (on->next != nullptr && !Takes(*on->family, pb)) on = on->next;
  return *on;
}

absl::StatusOr<const GpuKernel::OnDevice*> GpuKernel::Bind(const DeviceInfo& device) const {
  const Family* family = BestFor(device);
  if (family == nullptr) return nullptr;
  std::lock_guard<std::mutex> lock(mu_);
  return BindLocked(device, family);
}

absl::StatusOr<const GpuKernel::OnDevice*> GpuKernel::BindLocked(const DeviceInfo& device,
                                                                 const Family* family) const {
  std::unique_ptr<const OnDevice>& bound = bound_[{device.ordinal, family}];
  if (bound == nullptr) {
    // The next family that runs here serves what this one has no tile for.
    const OnDevice* next = nullptr;
    for (const Family& f : built_) {
      if (f.family->min_compute_capability < family->family->min_compute_capability &&
          f.family->RunsOn(device.ComputeCapability())) {
        absl::StatusOr<const OnDevice*> bound_next = BindLocked(device, &f);
        if (!bound_next.ok()) return bound_next.status();
        next = *bound_next;
        break;
      }
    }
    std::vector<int> blocks_per_sm;
    if (absl::Status st = PrepareOn(family->tiles, family->decode_tiles, device.ordinal,
                                    absl::StrCat("kernel family ", family->family->name),
                                    &blocks_per_sm);
        !st.ok()) {
      return st;
    }
    std::vector<int> slots;
    for (int blocks : blocks_per_sm) slots.push_back(std::max(1, blocks * device.multiprocessors));
    bound = std::make_unique<const OnDevice>(
        OnDevice{family, device.ordinal, device.compute_major >= 9, std::move(slots), next});
  }
  return bound.get();
}

absl::StatusOr<KernelHandle> GpuKernel::Resolve(KernelInfo base, const DeviceInfo* device) const {
  if (device == nullptr) {
    absl::StatusOr<KernelInfo> info = Describe(std::move(base));
    if (!info.ok()) return info.status();
    return KernelHandle(*std::move(info),
                        KernelHandle::Entry{&LaunchHere, &CheckHere, &WorkspaceHere,
                                            &MaxWorkspaceHere},
                        this);
  }
  if (!built()) return Describe(std::move(base)).status();
  absl::StatusOr<const OnDevice*> bound = Bind(*device);
  if (!bound.ok()) return bound.status();
  if (*bound == nullptr) return NotOn(base, *device);
  // Described for its own device's family.
  std::vector<const Family*> chain;
  for (const OnDevice* on = *bound; on != nullptr; on = on->next) chain.push_back(on->family);
  return KernelHandle(DescribeFamilies(std::move(base), chain),
                      KernelHandle::Entry{&LaunchBound, &CheckBound, &WorkspaceBound,
                                          &MaxWorkspaceBound},
                      *bound, device->ordinal);
}

// The split count the kernel chooses for `ctas` CTAs (before splitting) of
// `key_blocks` key blocks each on a device running `slots` at once: none
// when the CTAs nearly fill it; else as many as one wave of the device's
// resident CTAs holds (at most slots CTAs in all, which bounds the
// workspace: MaxWorkspaceBound relies on it), at most kMaxSplits and one
// key block per split. Decode is bound by memory latency, so the more CTAs
// resident at once the more bytes in flight: on the H200 (bench/RESULTS.md,
// thirteenth run) B=1, Sk=131072, GQA 32/8 ran 137.7 us with FA2's rule (the
// fewest splits within 85 % of the best wave efficiency: 110) and 134.2
// with 128; rows i and j get the same count from either rule.
int HeuristicSplits(int64_t ctas, int key_blocks, int slots) {
  if (ctas <= 0 || key_blocks <= 1 || ctas * 5 >= slots * 4) return 1;
  return static_cast<int>(
      std::min<int64_t>({kMaxSplits, key_blocks, std::max<int64_t>(1, slots / ctas)}));
}

GpuKernel::DecodePlan GpuKernel::PlanDecode(const OnDevice& bound, const AttentionProblem& pb,
                                            int forced, int64_t workspace_bytes) {
  DecodePlan plan;
  const int index = bound.family->DecodeIndex(pb.head_dim);
  // K/V caches run in the decode tile whatever the query rows (DescribeFamilies
  // gives kv_cache only to families with a decode tile per head_dim).
  if (index < 0 || (pb.seqlen_q > kDecodeMaxSeqlenQ && !pb.kv_cache)) return plan;
  plan.tile = &bound.family->decode_tiles[index];
  const int key_blocks =
      static_cast<int>((pb.seqlen_k + plan.tile->block_n - 1) / plan.tile->block_n);
  if (forced > 0) {
    plan.splits = std::max(1, std::min(forced, key_blocks));
    return plan;
  }
  const int64_t rows = pb.seqlen_q * (pb.heads_q / pb.heads_kv);
  const int64_t ctas = (rows + plan.tile->block_m - 1) / plan.tile->block_m * pb.heads_kv * pb.batch;
  plan.splits = HeuristicSplits(ctas, key_blocks, bound.decode_slots[index]);
  if (plan.splits > 1) {
    // As many splits as the workspace holds (one split needs none).
    const int64_t per_split = SplitKvWorkspaceBytes(pb, 2) / 2;
    plan.splits = static_cast<int>(std::min<int64_t>(plan.splits, workspace_bytes / per_split));
    if (plan.splits < 2) plan.splits = 1;
  }
  return plan;
}

int64_t GpuKernel::WorkspaceBound(const void* impl, const AttentionProblem& problem) {
  const OnDevice& serving = Serving(*static_cast<const OnDevice*>(impl), problem);
  const DecodePlan plan = PlanDecode(serving, problem, 0,
                                     std::numeric_limits<int64_t>::max());
  return SplitKvWorkspaceBytes(problem, plan.splits);
}

// The heuristic's splits × CTAs are at most slots, and each CTA holds
// block_m packed rows of (head_dim + 1) floats per split; forced counts
// are the caller's (ValidateWorkspace asks for their size).
int64_t GpuKernel::MaxWorkspaceBound(const void* impl) {
  int64_t most = 0;
  for (const OnDevice* on = static_cast<const OnDevice*>(impl); on != nullptr; on = on->next) {
    for (size_t i = 0; i < on->family->decode_tiles.size(); ++i) {
      const GpuDecodeTile& tile = on->family->decode_tiles[i];
      most = std::max(most, int64_t{on->decode_slots[i]} * tile.block_m * (tile.head_dim + 1) *
                                int64_t{sizeof(float)});
    }
  }
  return most;
}

const GpuKernel::OnDevice* GpuKernel::BoundHere(const void* impl) {
  const GpuKernel& kernel = *static_cast<const GpuKernel*>(impl);
  absl::StatusOr<DeviceInfo> device = CurrentCudaDevice();
  if (!device.ok()) return nullptr;
  absl::StatusOr<const OnDevice*> bound = kernel.Bind(*device);
  return bound.ok() ? *bound : nullptr;
}

int64_t GpuKernel::MaxWorkspaceHere(const void* impl) {
  const OnDevice* bound = BoundHere(impl);
  return bound == nullptr ? 0 : MaxWorkspaceBound(bound);
}

int64_t GpuKernel::WorkspaceHere(const void* impl, const AttentionProblem& problem) {
  const OnDevice* bound = BoundHere(impl);
  return bound == nullptr ? 0 : WorkspaceBound(bound, problem);
}

absl::Status GpuKernel::LaunchBound(const void* impl, const KernelInfo& info,
                                    const AttentionArgs& args, CUstream_st* stream) {
  const AttentionProblem& pb = args.problem;
  const OnDevice& bound = Serving(*static_cast<const OnDevice*>(impl), pb);
  if (const DecodePlan plan = PlanDecode(bound, pb, args.num_splits,
                                         args.workspace == nullptr ? 0 : args.workspace_bytes);
      plan.tile != nullptr) {
    FwdParams params = MakeParams(args);
    const bool split = plan.splits > 1;
    if (split) {
      params.num_splits = plan.splits;
      params.lse_rows = pb.QTokens() * pb.heads_q;
      params.o_accum = static_cast<float*>(args.workspace);
      params.lse_accum = params.o_accum + plan.splits * params.lse_rows * pb.head_dim;
      params.dependent_combine = bound.dependent_launch;
    }
    const Variant& variant = plan.tile->launchers.Get(args.dtype, pb.HasMask(), split);
    if (cudaError_t err = variant.launch(params, stream); err != cudaSuccess) {
      return CudaError(err, absl::StrCat("launch of kernel '", info.name, "' (decode tile)"));
    }
    return absl::OkStatus();
  }
  const GpuTile* tile = bound.family->ForHeadDim(pb.head_dim);
  if (tile == nullptr) {  // ValidateProblem refuses head_dims the kernel has no tile for
    return absl::InvalidArgumentError(
        absl::StrFormat("head_dim is %d; kernel '%s' has no tile for it in family %s",
                        pb.head_dim, info.name, bound.family->family->name));
  }
  const bool even = !pb.varlen && pb.seqlen_q % tile->block_m == 0 && pb.seqlen_k % tile->block_n == 0;
  const Variant& variant = tile->launchers.Get(args.dtype, even, pb.HasMask());
  if (variant.launch == nullptr) {  // ValidateProblem refuses what a kernel has no variant for
    return absl::InternalError(
        absl::StrCat("kernel '", info.name, "' has no variant for ", pb.ToString()));
  }
  if (cudaError_t err = variant.launch(MakeParams(args), stream); err != cudaSuccess) {
    // The hopper family's tensor maps cannot address these tensors: the
    // next family can.
    if (err == cudaErrorNotSupported && bound.next != nullptr) {
      return LaunchBound(bound.next, info, args, stream);
    }
    return CudaError(err, absl::StrCat("launch of kernel '", info.name, "'"));
  }
  return absl::OkStatus();
}

absl::Status GpuKernel::LaunchHere(const void* impl, const KernelInfo& info,
                                   const AttentionArgs& args, CUstream_st* stream) {
  const GpuKernel& kernel = *static_cast<const GpuKernel*>(impl);
  absl::StatusOr<DeviceInfo> device = CurrentCudaDevice();
  if (!device.ok()) return device.status();
  absl::StatusOr<const OnDevice*> bound = kernel.Bind(*device);
  if (!bound.ok()) return bound.status();
  if (*bound == nullptr) return kernel.NotOn(info, *device);
  return LaunchBound(*bound, info, args, stream);
}

absl::Status GpuKernel::CheckBound(const void* impl, const KernelInfo& info,
                                   const AttentionArgs& args) {
  const OnDevice& bound = *static_cast<const OnDevice*>(impl);
  int current = -1;
  if (cudaError_t err = cudaGetDevice(&current); err != cudaSuccess) {
    return CudaError(err, "cudaGetDevice");
  }
  if (current != bound.ordinal) {
    return absl::FailedPreconditionError(absl::StrFormat(
        "kernel '%s' was resolved for device %d; the calling thread's current device is %d",
        info.name, bound.ordinal, current));
  }
  return CheckDevicePointers(args);
}

absl::Status GpuKernel::CheckHere(const void* impl, const KernelInfo& info,
                                  const AttentionArgs& args) {
  const GpuKernel& kernel = *static_cast<const GpuKernel*>(impl);
  absl::StatusOr<DeviceInfo> device = CurrentCudaDevice();
  if (!device.ok()) {
    return absl::FailedPreconditionError(absl::StrCat(
        "kernel '", info.name, "' needs a CUDA device: ", device.status().message()));
  }
  if (kernel.BestFor(*device) == nullptr) return kernel.NotOn(info, *device);
  return CheckDevicePointers(args);
}

absl::StatusOr<DeviceInfo> CurrentCudaDevice() {
  int count = 0;
  if (cudaGetDeviceCount(&count) != cudaSuccess || count == 0) {
    cudaGetLastError();  // not sticky; keep the thread's error state clean
    return absl::FailedPreconditionError("no CUDA device is visible");
  }
  int ordinal = 0;
  if (cudaError_t err = cudaGetDevice(&ordinal); err != cudaSuccess) {
    return CudaError(err, "cudaGetDevice");
  }
  return GetCudaDevice(ordinal);
}

}  // namespace attn::fa2
