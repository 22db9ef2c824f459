// The GPU half of the registry (gpu_kernels.h): the ladder's kernels and the
// step-7 tuning candidates, the tuned choice per device, and the launch path
// from AttentionArgs to LaunchFlashFwd. Host code only.
#include "gpu_kernels.h"

#include <cuda_runtime_api.h>

#include <cmath>
#include <map>
#include <mutex>
#include <string>

#include "absl/strings/str_cat.h"
#include "attn/device.h"
#include "attn/tuning.h"
#include "ladder_configs.h"
#include "launch.h"

namespace attn {
namespace fa2 {
namespace {

struct GpuKernel {
  const char* name;
  int step;
  const char* description;
  int block_m;
  int block_n;
  int num_warps;
  LaunchFn launch_fp16;
  LaunchFn launch_bf16;
};

template <class Cfg>
GpuKernel Make(const char* name, int step, const char* description) {
  return {name,          step,
          description,   Cfg::kBlockM,
          Cfg::kBlockN,  Cfg::kNumWarps,
          &LaunchFlashFwd<Cfg, DType::kFloat16>, &LaunchFlashFwd<Cfg, DType::kBFloat16>};
}

// Ladder steps with a fixed configuration, in order (step 7 is resolved per
// device from the candidates below).
const std::vector<GpuKernel>& FixedLadder() {
  static const std::vector<GpuKernel> kernels = {
      Make<K01Base>("k01_base", 1,
                    "base: mma.sync m16n8k16 + ldmatrix + cp.async, 64x64, 4 warps"),
      Make<K02Swizzle>("k02_swizzle", 2, "XOR-swizzled shared memory (no bank conflicts)"),
      Make<K03EagerKV>("k03_eager_kv", 3, "eager K/V loads overlapping compute"),
      Make<K04Sliced>("k04_sliced_ldst", 4,
                      "shared->register loads interleaved with mma's, 16-wide slices"),
      Make<K05RfDoubleBuffer>("k05_rf_double_buffer", 5,
                              "register fragments double-buffered one slice ahead"),
      Make<K06Exp2Softmax>("k06_exp2_softmax", 6,
                           "softmax as exp2 with the scale folded into one FFMA"),
  };
  return kernels;
}

// The step-7 search space (see K07Candidate): tile shape, warps, whether Q
// stays in registers, K/V slicing and register double-buffering.
const std::vector<GpuKernel>& Candidates() {
  static const std::vector<GpuKernel> kernels = {
      Make<K07Candidate<64, 64, 4, true, true, false>>(
          "k07/64x64_w4_qregs", 7, "64x64, 4 warps, Q in registers, K/V sliced"),
      Make<K07Candidate<64, 64, 4, false, true, true>>(
          "k07/64x64_w4_sliced_db", 7, "64x64, 4 warps, Q/K/V sliced, double-buffered"),
      Make<K07Candidate<64, 128, 4, false, true, true>>(
          "k07/64x128_w4_sliced_db", 7, "64x128, 4 warps, Q/K/V sliced, double-buffered"),
      Make<K07Candidate<128, 32, 4, false, true, true>>(
          "k07/128x32_w4_sliced_db", 7, "128x32, 4 warps, Q/K/V sliced, double-buffered"),
      Make<K07Candidate<128, 64, 4, false, true, false>>(
          "k07/128x64_w4_sliced", 7, "128x64, 4 warps, Q/K/V sliced"),
      Make<K07Candidate<128, 64, 4, false, true, true>>(
          "k07/128x64_w4_sliced_db", 7, "128x64, 4 warps, Q/K/V sliced, double-buffered"),
      Make<K07Candidate<128, 64, 8, false, true, true>>(
          "k07/128x64_w8_sliced_db", 7, "128x64, 8 warps, Q/K/V sliced, double-buffered"),
      Make<K07Candidate<128, 128, 8, false, true, true>>(
          "k07/128x128_w8_sliced_db", 7, "128x128, 8 warps, Q/K/V sliced, double-buffered"),
  };
  return kernels;
}

constexpr char kAutotunedName[] = "k07_autotuned";
// FA2's own choice for head_dim 128 on sm80 and sm90 (128x64, 4 warps).
constexpr char kDefaultCandidate[] = "k07/128x64_w4_sliced_db";

const GpuKernel* FindIn(const std::vector<GpuKernel>& kernels, const std::string& name) {
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

// The candidate k07_autotuned runs on the current device.
absl::StatusOr<const GpuKernel*> ResolveAutotuned() {
  std::string candidate = kDefaultCandidate;
  if (CurrentDevice device = GetCurrentDevice(); device.ordinal >= 0) {
    absl::StatusOr<std::string> tuned = LookupTunedCandidate(device.name);
    if (!tuned.ok()) return tuned.status();
    if (!tuned->empty()) candidate = *tuned;
  }
  const GpuKernel* kernel = FindIn(Candidates(), candidate);
  if (kernel == nullptr) {
    return absl::FailedPreconditionError(absl::StrCat(
        "the tuning table names candidate '", candidate, "', which this build does not have"));
  }
  return kernel;
}

KernelInfo ToInfo(const GpuKernel& k, const char* name, const std::string& description) {
  KernelInfo info;
  info.name = name;
  info.ladder_step = k.step;
  info.description = description;
  info.backend = Backend::kCuda;
  info.head_dim = 128;
  info.seq_multiple = std::max(k.block_m, k.block_n);  // both are powers of two
  info.block_m = k.block_m;
  info.block_n = k.block_n;
  info.num_warps = k.num_warps;
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

std::vector<KernelInfo> GpuKernels() {
  std::vector<KernelInfo> kernels;
  for (const fa2::GpuKernel& k : fa2::FixedLadder()) {
    kernels.push_back(fa2::ToInfo(k, k.name, k.description));
  }
  absl::StatusOr<const fa2::GpuKernel*> tuned = fa2::ResolveAutotuned();
  const fa2::GpuKernel* chosen =
      tuned.ok() ? *tuned : fa2::FindIn(fa2::Candidates(), fa2::kDefaultCandidate);
  kernels.push_back(fa2::ToInfo(
      *chosen, fa2::kAutotunedName,
      absl::StrCat("auto-tuned step 6 kernel; here: ", chosen->name + 4, " (",
                   chosen->description, ")")));
  return kernels;
}

std::vector<KernelInfo> GpuTuningCandidates() {
  std::vector<KernelInfo> kernels;
  for (const fa2::GpuKernel& k : fa2::Candidates()) {
    kernels.push_back(fa2::ToInfo(k, k.name, k.description));
  }
  return kernels;
}

absl::Status LaunchGpuKernel(const KernelInfo& kernel, const AttentionArgs& args,
                             CUstream_st* stream) {
  const fa2::CurrentDevice device = fa2::GetCurrentDevice();
  if (device.ordinal < 0) {
    return absl::FailedPreconditionError(
        absl::StrCat("kernel '", kernel.name, "' needs a CUDA device, and none is visible"));
  }
  if (device.compute_major < 8) {
    return absl::FailedPreconditionError(absl::StrCat(
        "kernel '", kernel.name, "' needs compute capability 8.0 or newer; device ",
        device.ordinal, " (", device.name, ") has ", device.compute_major, ".x"));
  }
  const fa2::GpuKernel* k = nullptr;
  if (kernel.name == fa2::kAutotunedName) {
    absl::StatusOr<const fa2::GpuKernel*> tuned = fa2::ResolveAutotuned();
    if (!tuned.ok()) return tuned.status();
    k = *tuned;
  } else {
    k = fa2::FindIn(fa2::FixedLadder(), kernel.name);
    if (k == nullptr) k = fa2::FindIn(fa2::Candidates(), kernel.name);
  }
  if (k == nullptr) return absl::NotFoundError(absl::StrCat("no GPU kernel '", kernel.name, "'"));
  if (args.q.shape.seq_len % std::max(k->block_m, k->block_n) != 0) {
    // Only possible if the tuning table changed between validation and launch.
    return absl::InvalidArgumentError(absl::StrCat(
        "shape.seq_len is ", args.q.shape.seq_len, "; kernel '", k->name,
        "' needs a multiple of ", std::max(k->block_m, k->block_n)));
  }
  for (const auto& [field, ptr] : {std::pair<const char*, const void*>{"q.data", args.q.data},
                                   {"k.data", args.k.data},
                                   {"v.data", args.v.data},
                                   {"out.data", args.out.data}}) {
    if (absl::Status st = fa2::CheckDevicePointer(field, ptr); !st.ok()) return st;
  }

  const Shape& s = args.q.shape;
  fa2::FwdParams params{};
  params.q = args.q.data;
  params.k = args.k.data;
  params.v = args.v.data;
  params.o = args.out.data;
  params.row_stride = s.RowStride();
  params.batch_stride = s.seq_len * params.row_stride;
  params.head_stride = s.head_dim;
  params.batch = static_cast<int>(s.batch);
  params.seq_len = static_cast<int>(s.seq_len);
  params.num_heads = static_cast<int>(s.num_heads);
  params.scale = args.ResolvedScale();
  params.scale_log2 = params.scale * static_cast<float>(M_LOG2E);

  const fa2::LaunchFn launch = args.q.dtype == DType::kBFloat16 ? k->launch_bf16 : k->launch_fp16;
  if (cudaError_t err = launch(params, stream); err != cudaSuccess) {
    return fa2::CudaError(err, absl::StrCat("launch of kernel '", kernel.name, "'"));
  }
  return absl::OkStatus();
}

}  // namespace internal
}  // namespace attn
