// attn/attention.h
//
// The kernel library's entry point: a registry of attention kernels and one
// Forward() that validates arguments and runs a kernel by name.
//
// Kernels:
//   * "cpu_reference": fp32-accumulating, multi-threaded, tiled CPU attention
//     with an online softmax. Host pointers. Any head_dim up to
//     kMaxCpuHeadDim, any seq_len. Runs synchronously; `stream` is ignored.
//   * The FlashAttention-2 ladder ("k01_base" ... ), in ladder order, with the
//     seed's constraints: device pointers, head_dim 128, non-causal
//     self-attention, seq_len a multiple of the kernel's block sizes, every
//     pointer 16-byte aligned.
//   * "flash_fwd", the production kernel: every feature of attn/problem.h
//     (causal, window, any lengths, GQA/MQA, head_dim 64/96/128/192/256, LSE,
//     varlen, strides).
//   GPU kernels are asynchronous on `stream`: Forward returns once the launch
//   is queued; errors of the launch itself are reported, errors during
//   execution surface at the next synchronisation.
//
// Errors: INVALID_ARGUMENT for arguments a kernel cannot take (the message
// names the field and the rule; nothing is launched), NOT_FOUND for an unknown
// kernel name, FAILED_PRECONDITION when a GPU kernel is asked for in a build or
// on a host without CUDA, INTERNAL for CUDA runtime failures.
#ifndef ATTN_ATTENTION_H_
#define ATTN_ATTENTION_H_

#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "attn/problem.h"

// CUDA's stream handle type, declared the way cuda_runtime.h declares it, so
// this header needs no CUDA headers (cudaStream_t converts implicitly).
struct CUstream_st;

namespace attn {

enum class Backend : int { kCpu = 0, kCuda = 1 };

inline constexpr int64_t kMaxCpuHeadDim = 512;
inline constexpr char kCpuKernelName[] = "cpu_reference";
// The production GPU kernel: every feature, the tuned tile per head_dim.
inline constexpr char kProductionKernelName[] = "flash_fwd";

// What a kernel accepts beyond the basic problem (non-causal self-attention,
// equal lengths, heads_q == heads_kv, no LSE). ValidateArgs refuses anything
// else with INVALID_ARGUMENT naming the field and the rule.
struct KernelCapabilities {
  std::vector<int> head_dims;  // the head_dims accepted; empty = any up to kMaxCpuHeadDim
  int seq_multiple = 1;        // seqlen_q and seqlen_k must be multiples of this
  bool causal = false;
  bool window = false;          // sliding window (window_left / window_right)
  bool gqa = false;             // heads_kv < heads_q
  bool seqlen_q_ne_k = false;   // seqlen_q != seqlen_k
  bool lse = false;             // return_lse
  bool varlen = false;          // packed sequences with cu_seqlens
  bool strided = false;         // non-contiguous strides
  int min_compute_capability = 0;  // e.g. 80 for sm_80; 0 for the CPU
};

struct KernelInfo {
  std::string name;         // stable identifier, e.g. "k07_autotuned"
  int ladder_step = 0;      // 1..16 on the FA2 ladder; 0 for the CPU reference and production
  std::string description;  // one line: what this step adds
  Backend backend = Backend::kCpu;
  KernelCapabilities caps;
  int block_m = 0;       // query rows per CTA (GPU kernels; at head_dim 128 for production)
  int block_n = 0;       // key/value rows per main-loop step (GPU kernels)
  int num_warps = 0;     // warps per CTA (GPU kernels)
};

// Every kernel this build can run: the CPU reference first, then the GPU
// ladder in step order and the production kernel (empty GPU part without
// CUDA). Tile sizes of tuned kernels are those chosen for the current device.
std::vector<KernelInfo> ListKernels();

// The candidates "k07_autotuned" chooses among (ladder step 7), named
// "k07/<shape>", e.g. "k07/128x64_w4_sliced_db". Runnable by name like any
// kernel; attn_tune times them to write the tuning table (attn/tuning.h).
std::vector<KernelInfo> ListTuningCandidates();

// The kernel or tuning candidate named `name`, or NOT_FOUND listing the
// known kernel names.
absl::StatusOr<KernelInfo> FindKernel(absl::string_view name);

// The production GPU kernel (every feature) when a CUDA device is usable,
// else the CPU reference.
KernelInfo DefaultKernel();

// Checks `args` against the rules of `kernel` without running anything.
absl::Status ValidateArgs(const AttentionArgs& args, const KernelInfo& kernel);

// A kernel resolved once: its launch functions and tuned tile are fixed at
// resolution, so running it does no name lookup or tuning-table read.
// Copyable and cheap; valid for the life of the process.
class KernelHandle {
 public:
  const KernelInfo& info() const { return info_; }
  // Validates, then runs (see Forward for errors and asynchrony).
  absl::Status Run(const AttentionArgs& args, CUstream_st* stream = nullptr) const;

  // Implementation detail: the launch entry of a resolved kernel.
  using RunFn = absl::Status (*)(const void* impl, const KernelInfo& info,
                                 const AttentionArgs& args, CUstream_st* stream);
  KernelHandle(KernelInfo info, RunFn run, const void* impl)
      : info_(std::move(info)), run_(run), impl_(impl) {}

 private:
  KernelInfo info_;
  RunFn run_;
  const void* impl_;
};

// Resolves `name` (a kernel or a tuning candidate); NOT_FOUND if unknown.
absl::StatusOr<KernelHandle> ResolveKernel(absl::string_view name);

// Resolves, validates, then runs kernel `kernel_name` on `args`. Prefer a
// KernelHandle on hot paths.
absl::Status Forward(const AttentionArgs& args, absl::string_view kernel_name,
                     CUstream_st* stream = nullptr);

}  // namespace attn

#endif  // ATTN_ATTENTION_H_
