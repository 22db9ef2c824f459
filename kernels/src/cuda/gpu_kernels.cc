// The GPU half of the registry (gpu_kernels.h): the ladder's kernels, the
// step-7 tuning candidates and the production kernel, each resolved once
// into a KernelHandle whose Run builds FwdParams and calls a launcher chosen
// by dtype, even lengths and mask. Host code only.
#include "gpu_kernels.h"

#include <cuda_runtime_api.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <mutex>
#include <string>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "attn/device.h"
#include "attn/tuning.h"
#include "ladder_configs.h"
#include "launch.h"

namespace attn {
namespace fa2 {
namespace {

// One compiled configuration.
struct GpuKernel {
  const char* name;
  int step;
  const char* description;
  int head_dim;
  int block_m;
  int block_n;
  int num_warps;
  Launchers launchers;
};

template <class Cfg>
GpuKernel Candidate(const char* name, int step, const char* description) {
  return {name,         step,         description,     Cfg::kHeadDim,
          Cfg::kBlockM, Cfg::kBlockN, Cfg::kNumWarps, LadderLaunchers<Cfg>()};
}

template <class Cfg>
GpuKernel Production() {
  return {kProductionKernelName, 0, "", Cfg::kHeadDim, Cfg::kBlockM, Cfg::kBlockN,
          Cfg::kNumWarps, AllLaunchers<Cfg>()};
}

struct LadderStep {
  int step;
  const char* name;
  const char* description;
};

// kernel_table.inc, expanded three ways: the steps, their candidates, and
// the production kernel's head_dims.
const std::vector<LadderStep>& Steps() {
  static const std::vector<LadderStep> steps = {
#define ATTN_STEP(step, name, description) {step, name, description},
#define ATTN_KERNEL(name, step, config, description)
#define ATTN_PRODUCTION(config)
#include "kernel_table.inc"
#undef ATTN_STEP
#undef ATTN_KERNEL
#undef ATTN_PRODUCTION
  };
  return steps;
}

const std::vector<GpuKernel>& Candidates() {
  static const std::vector<GpuKernel> kernels = {
#define ATTN_STEP(step, name, description)
#define ATTN_KERNEL(name, step, config, description) Candidate<config>(name, step, description),
#define ATTN_PRODUCTION(config)
#include "kernel_table.inc"
#undef ATTN_STEP
#undef ATTN_KERNEL
#undef ATTN_PRODUCTION
  };
  return kernels;
}

// The production kernel's tiles, one per head_dim.
const std::vector<GpuKernel>& ProductionFamily() {
  static const std::vector<GpuKernel> kernels = {
#define ATTN_STEP(step, name, description)
#define ATTN_KERNEL(name, step, config, description)
#define ATTN_PRODUCTION(config) Production<config>(),
#include "kernel_table.inc"
#undef ATTN_STEP
#undef ATTN_KERNEL
#undef ATTN_PRODUCTION
  };
  return kernels;
}

constexpr int kMinComputeCapability = 80;  // mma.sync bf16, ldmatrix, cp.async

const GpuKernel* FindIn(const std::vector<GpuKernel>& kernels, absl::string_view name) {
  for (const GpuKernel& k : kernels) {
    if (name == k.name) return &k;
  }
  return nullptr;
}

absl::Status CudaError(cudaError_t err, absl::string_view what) {
  return absl::InternalError(absl::StrCat(what, ": ", cudaGetErrorName(err), " (",
                                          cudaGetErrorString(err), ")"));
}

struct CurrentDevice {
  int ordinal = -1;  // -1: no usable device
  std::string name;
  int compute_major = 0;
};

// The calling thread's current device, its properties cached per ordinal.
CurrentDevice GetCurrentDevice() {
  static std::mutex mu;
  static std::map<int, CurrentDevice> cache;
  int count = 0;
  if (cudaGetDeviceCount(&count) != cudaSuccess || count == 0) {
    cudaGetLastError();  // not sticky; keep the thread's error state clean
    return {};
  }
  int ordinal = 0;
  if (cudaGetDevice(&ordinal) != cudaSuccess) return {};
  std::lock_guard<std::mutex> lock(mu);
  auto it = cache.find(ordinal);
  if (it == cache.end()) {
    cudaDeviceProp prop{};
    if (cudaGetDeviceProperties(&prop, ordinal) != cudaSuccess) return {};
    it = cache.emplace(ordinal, CurrentDevice{ordinal, prop.name, prop.major}).first;
  }
  return it->second;
}

// A step's candidates share the prefix of their names up to the '/'
// ("k07/"); a step with one candidate named like the step has none.
std::string StepPrefix(const LadderStep& step) {
  return absl::StrFormat("k%02d/", step.step);
}

// The candidate `step` runs on the current device: the tuning table's entry
// for (device, step), else the step's first candidate. The table
// ($ATTN_TUNING_TABLE, then the built-in one) is read here, at resolution.
absl::StatusOr<const GpuKernel*> ResolveStep(const LadderStep& step) {
  std::string tuned;
  if (CurrentDevice device = GetCurrentDevice(); device.ordinal >= 0) {
    absl::StatusOr<std::string> found = LookupTunedCandidate(device.name, StepPrefix(step));
    if (!found.ok()) return found.status();
    tuned = *found;
  }
  const GpuKernel* first = nullptr;
  for (const GpuKernel& k : Candidates()) {
    if (k.step != step.step) continue;
    if (first == nullptr) first = &k;
    if (!tuned.empty() && tuned == k.name) return &k;
  }
  if (!tuned.empty()) {
    return absl::FailedPreconditionError(absl::StrCat(
        "the tuning table names candidate '", tuned, "', which this build does not have"));
  }
  if (first == nullptr) {
    return absl::InternalError(absl::StrCat("step ", step.step, " has no candidate"));
  }
  return first;
}

KernelInfo LadderInfo(const GpuKernel& k, absl::string_view name, std::string description) {
  KernelInfo info;
  info.name = std::string(name);
  info.ladder_step = k.step;
  info.description = std::move(description);
  info.backend = Backend::kCuda;
  info.caps.head_dims = {k.head_dim};
  info.caps.seq_multiple = std::max(k.block_m, k.block_n);  // both are powers of two
  info.caps.min_compute_capability = kMinComputeCapability;
  info.block_m = k.block_m;
  info.block_n = k.block_n;
  info.num_warps = k.num_warps;
  return info;
}

KernelInfo ProductionInfo() {
  const GpuKernel& reference = ProductionFamily()[2];  // head_dim 128 (the table lists 64, 96, 128, ...)
  KernelInfo info;
  info.name = kProductionKernelName;
  info.ladder_step = 0;
  info.description =
      "production FA2 forward: causal, window, any lengths, GQA/MQA, LSE, varlen, strides; "
      "head_dim 64/96/128/192/256, each with its own tile";
  info.backend = Backend::kCuda;
  KernelCapabilities& caps = info.caps;
  for (const GpuKernel& k : ProductionFamily()) caps.head_dims.push_back(k.head_dim);
  caps.causal = caps.window = caps.gqa = caps.seqlen_q_ne_k = caps.lse = caps.varlen =
      caps.strided = true;
  caps.min_compute_capability = kMinComputeCapability;
  info.block_m = reference.block_m;
  info.block_n = reference.block_n;
  info.num_warps = reference.num_warps;
  return info;
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

FwdParams MakeParams(const AttentionArgs& args) {
  const AttentionProblem& pb = args.problem;
  FwdParams p{};
  p.q = args.q;
  p.k = args.k;
  p.v = args.v;
  p.o = args.out;
  p.lse = pb.return_lse ? args.lse : nullptr;
  p.cu_seqlens_q = pb.varlen ? args.cu_seqlens_q : nullptr;
  p.cu_seqlens_k = pb.varlen ? args.cu_seqlens_k : nullptr;
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
  p.window_left = static_cast<int>(pb.window_left);
  p.window_right = static_cast<int>(pb.EffectiveWindowRight());
  p.scale = pb.ResolvedScale();
  p.scale_log2 = p.scale * static_cast<float>(M_LOG2E);
  return p;
}

// A handle's `impl` is the GpuKernel it runs, or null for the production
// family, whose tile is chosen per call by head_dim.
absl::Status RunGpu(const void* impl, const KernelInfo& info, const AttentionArgs& args,
                    CUstream_st* stream) {
  if (absl::Status st = ValidateArgs(args, info); !st.ok()) return st;
  const CurrentDevice device = GetCurrentDevice();
  if (device.ordinal < 0) {
    return absl::FailedPreconditionError(
        absl::StrCat("kernel '", info.name, "' needs a CUDA device, and none is visible"));
  }
  if (device.compute_major * 10 < kMinComputeCapability) {
    return absl::FailedPreconditionError(absl::StrCat(
        "kernel '", info.name, "' needs compute capability 8.0 or newer; device ",
        device.ordinal, " (", device.name, ") has ", device.compute_major, ".x"));
  }
  const AttentionProblem& pb = args.problem;
  std::vector<std::pair<const char*, const void*>> pointers = {
      {"q", args.q}, {"k", args.k}, {"v", args.v}, {"out", args.out}};
  if (pb.return_lse) pointers.emplace_back("lse", args.lse);
  if (pb.varlen) {
    pointers.emplace_back("cu_seqlens_q", args.cu_seqlens_q);
    pointers.emplace_back("cu_seqlens_k", args.cu_seqlens_k);
  }
  for (const auto& [field, ptr] : pointers) {
    if (absl::Status st = CheckDevicePointer(field, ptr); !st.ok()) return st;
  }

  const GpuKernel* k = static_cast<const GpuKernel*>(impl);
  if (k == nullptr) {
    for (const GpuKernel& candidate : ProductionFamily()) {
      if (candidate.head_dim == pb.head_dim) k = &candidate;
    }
  }
  if (k == nullptr) {  // ValidateArgs checked head_dim against the family's
    return absl::InternalError(absl::StrCat("no tile for head_dim ", pb.head_dim));
  }
  const bool even = !pb.varlen && pb.seqlen_q % k->block_m == 0 && pb.seqlen_k % k->block_n == 0;
  const LaunchFn launch = k->launchers.Get(args.dtype, even, pb.HasMask());
  if (launch == nullptr) {  // ValidateArgs refuses what the ladder has no variant for
    return absl::InternalError(absl::StrCat("kernel '", info.name, "' has no variant for ",
                                            pb.ToString()));
  }
  if (cudaError_t err = launch(MakeParams(args), stream); err != cudaSuccess) {
    return CudaError(err, absl::StrCat("launch of kernel '", info.name, "'"));
  }
  return absl::OkStatus();
}

}  // namespace
}  // namespace fa2

bool BuiltWithCuda() { return true; }

std::vector<DeviceInfo> ListCudaDevices() {
  std::vector<DeviceInfo> devices;
  int count = 0;
  if (cudaGetDeviceCount(&count) != cudaSuccess) {
    cudaGetLastError();
    return devices;
  }
  for (int i = 0; i < count; ++i) {
    cudaDeviceProp prop{};
    if (cudaGetDeviceProperties(&prop, i) != cudaSuccess || prop.major < 8) continue;
    devices.push_back({i, prop.name, prop.major, prop.minor, prop.multiProcessorCount,
                       static_cast<int64_t>(prop.totalGlobalMem)});
  }
  return devices;
}

namespace internal {

namespace {

// A step's info: its own name, the tile of the candidate it runs here.
KernelInfo StepInfo(const fa2::LadderStep& step, const fa2::GpuKernel& chosen) {
  std::string description = step.description;
  if (chosen.name != absl::string_view(step.name)) {
    absl::StrAppend(&description, "; here: ", chosen.name, " (", chosen.description, ")");
  }
  return fa2::LadderInfo(chosen, step.name, std::move(description));
}

}  // namespace

std::vector<KernelInfo> GpuKernels() {
  std::vector<KernelInfo> kernels;
  for (const fa2::LadderStep& step : fa2::Steps()) {
    absl::StatusOr<const fa2::GpuKernel*> chosen = fa2::ResolveStep(step);
    if (chosen.ok()) kernels.push_back(StepInfo(step, **chosen));
  }
  kernels.push_back(fa2::ProductionInfo());
  return kernels;
}

std::vector<KernelInfo> GpuTuningCandidates() {
  std::vector<KernelInfo> kernels;
  for (const fa2::GpuKernel& k : fa2::Candidates()) {
    const bool is_a_step = std::any_of(fa2::Steps().begin(), fa2::Steps().end(),
                                       [&](const fa2::LadderStep& s) { return s.name == absl::string_view(k.name); });
    if (!is_a_step) kernels.push_back(fa2::LadderInfo(k, k.name, k.description));
  }
  return kernels;
}

absl::StatusOr<KernelHandle> ResolveGpuKernel(absl::string_view name) {
  if (name == kProductionKernelName) {
    return KernelHandle(fa2::ProductionInfo(), &fa2::RunGpu, nullptr);
  }
  for (const fa2::LadderStep& step : fa2::Steps()) {
    if (name != step.name) continue;
    absl::StatusOr<const fa2::GpuKernel*> chosen = fa2::ResolveStep(step);
    if (!chosen.ok()) return chosen.status();
    return KernelHandle(StepInfo(step, **chosen), &fa2::RunGpu, *chosen);
  }
  const fa2::GpuKernel* k = fa2::FindIn(fa2::Candidates(), name);
  if (k == nullptr) return absl::NotFoundError(absl::StrCat("no GPU kernel '", name, "'"));
  return KernelHandle(fa2::LadderInfo(*k, k->name, k->description), &fa2::RunGpu, k);
}

}  // namespace internal
}  // namespace attn
