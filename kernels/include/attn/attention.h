// attn/attention.h
//
// The kernel library's entry point: a registry of attention kernels, each
// resolved by name (and, for GPU kernels, per device) into a KernelHandle
// that validates and runs it, and one Forward() that does both by name.
//
// Kernels of attn::kernels (always registered):
//   * "cpu_reference": fp32-accumulating, multi-threaded, tiled CPU attention
//     with an online softmax. Host pointers. Any head_dim up to
//     kMaxCpuHeadDim, any seq_len. Runs synchronously; `stream` is ignored.
//   * "flash_fwd", the production GPU kernel: every feature of attn/problem.h
//     (causal, window, any lengths, GQA/MQA, head_dim 64/96/128/192/256, LSE,
//     varlen, strides, a dense or paged K/V cache with append), in the best
//     kernel family each device has
//     (attn/kernel_family.h).
// Other kernel libraries register theirs (attn/kernel_library.h): the
// FlashAttention-2 ladder ("k01_base" ... and the step-7 tuning candidates)
// once attn::ladder::Register() (attn/ladder.h) has run.
//   GPU kernels are asynchronous on `stream`: a launch returns once it is
//   queued; errors of the launch itself are reported, errors during
//   execution surface at the next synchronisation.
//
// Errors: INVALID_ARGUMENT for arguments a kernel cannot take (the message
// names the field and the rule; nothing is launched), NOT_FOUND for a name
// no registered library knows, FAILED_PRECONDITION for a kernel this build
// or device cannot run (a CUDA kernel in a build without CUDA, a device
// below the kernel's compute capability, no GPU), INTERNAL for CUDA runtime
// failures.
#ifndef ATTN_ATTENTION_H_
#define ATTN_ATTENTION_H_

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "attn/device.h"
#include "attn/problem.h"

// CUDA's stream handle type, declared the way cuda_runtime.h declares it, so
// this header needs no CUDA headers (cudaStream_t converts implicitly).
struct CUstream_st;

namespace attn {

enum class Backend : int { kCpu = 0, kCuda = 1 };

inline constexpr int64_t kMaxCpuHeadDim = 512;
// The CPU kernels: the reference (simple, every feature) and the fast one
// the CPU backend serves by default (attn/cpu_flash.h).
inline constexpr char kCpuKernelName[] = "cpu_reference";
inline constexpr char kCpuFlashKernelName[] = "cpu_flash";
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
  bool kv_cache = false;        // a K/V cache: cache_seqlens, paged, append
  int min_compute_capability = 0;  // e.g. 80 for sm_80; 0 for the CPU
};

struct KernelInfo {
  std::string name;         // stable identifier, e.g. "k07_autotuned"
  int ladder_step = 0;      // 1..16 on the FA2 ladder; 0 for the CPU reference and production
  std::string description;  // one line: what this step adds
  Backend backend = Backend::kCpu;
  KernelCapabilities caps;
  std::string family;    // GPU kernels: the kernel family it runs in (attn/kernel_family.h)
  int block_m = 0;       // query rows per CTA (GPU kernels; at head_dim 128 for production)
  int block_n = 0;       // key/value rows per main-loop step (GPU kernels)
  int num_warps = 0;     // warps per CTA (GPU kernels)
};

// Every kernel this build has linked and registered: the CPU reference
// first, then the kernels of registered libraries (the ladder in step
// order), then the production GPU kernel (no GPU kernel without CUDA).
// Tile sizes and families of GPU kernels are those chosen for the calling
// thread's current device.
std::vector<KernelInfo> ListKernels();

// The kernels runnable by name but not listed: the candidates
// "k07_autotuned" chooses among (ladder step 7), named "k07/<shape>", e.g.
// "k07/128x64_w4_sliced_db", when the ladder is registered. attn_tune times
// them to write the tuning table (attn/tuning.h).
std::vector<KernelInfo> ListTuningCandidates();

// The kernel or tuning candidate named `name` (errors as ResolveKernel).
absl::StatusOr<KernelInfo> FindKernel(absl::string_view name);

// The production GPU kernel (every feature) when a CUDA device is usable,
// else the CPU reference.
KernelInfo DefaultKernel();

// Checks `args` against the rules of `kernel` without running anything.
absl::Status ValidateArgs(const AttentionArgs& args, const KernelInfo& kernel);

// A kernel resolved once: its launch functions, tuned tile and (for GPU
// kernels) family are fixed at resolution, so launching it does no name
// lookup or tuning-table read. Copyable and cheap; valid for the life of
// the process.
class KernelHandle {
 public:
  const KernelInfo& info() const { return info_; }
  // The device ordinal a GPU kernel was resolved for, whose facts it holds
  // and on which its launch attributes are set; -1 for a handle that runs
  // on the calling thread's current device (looked up at each launch) and
  // for the CPU kernel.
  int device() const { return device_; }

  // For the library's users: validates `args` (ValidateArgs against info(),
  // the workspace, device pointers and, for a handle bound to a device, that
  // it is the current one), then launches. Errors and asynchrony as above.
  absl::Status Run(const AttentionArgs& args, CUstream_st* stream = nullptr) const;

  // For callers that have checked `args` themselves: launches without any
  // of Run's checks. The caller guarantees what Run would check —
  // ValidateProblem(args.problem, info()) passed, pointers and strides meet
  // ValidateArgs' rules (device memory for GPU kernels), the workspace
  // meets ValidateWorkspace's, and a bound handle's device is the calling
  // thread's current one. Errors: INTERNAL for a failed launch.
  absl::Status Launch(const AttentionArgs& args, CUstream_st* stream = nullptr) const;

  // Bytes of device scratch memory (AttentionArgs::workspace) a call of
  // `problem` runs fastest with (flash_fwd's split-KV partial results for
  // few query rows on the device it runs on); 0 when it uses none. Given
  // less, the kernel splits no further than the workspace holds.
  int64_t WorkspaceBytes(const AttentionProblem& problem) const;
  // At least WorkspaceBytes(problem) for every problem, on the device the
  // handle runs on: what a caller that allocates once (the server's
  // executors, one workspace per stream) allocates. 0 when none is used.
  int64_t MaxWorkspaceBytes() const;

  // For kernel libraries (attn/kernel_library.h): a kernel is these
  // functions over its `impl`. `launch` runs without checks; `check`, if
  // any, is what Run checks beyond ValidateArgs and the workspace (device
  // pointers, the device); `workspace_bytes`, if any, sizes the workspace
  // and `max_workspace_bytes` bounds it over all problems (both or neither).
  using LaunchFn = absl::Status (*)(const void* impl, const KernelInfo& info,
                                    const AttentionArgs& args, CUstream_st* stream);
  using CheckFn = absl::Status (*)(const void* impl, const KernelInfo& info,
                                   const AttentionArgs& args);
  using WorkspaceFn = int64_t (*)(const void* impl, const AttentionProblem& problem);
  using MaxWorkspaceFn = int64_t (*)(const void* impl);
  struct Entry {
    LaunchFn launch = nullptr;
    CheckFn check = nullptr;
    WorkspaceFn workspace_bytes = nullptr;
    MaxWorkspaceFn max_workspace_bytes = nullptr;
  };
  KernelHandle(KernelInfo info, const Entry& entry, const void* impl, int device = -1)
      : info_(std::move(info)), entry_(entry), impl_(impl), device_(device) {}
  // A kernel with nothing to check beyond ValidateArgs and no workspace.
  KernelHandle(KernelInfo info, LaunchFn launch, const void* impl)
      : KernelHandle(std::move(info), Entry{launch, nullptr, nullptr}, impl) {}

 private:
  KernelInfo info_;
  Entry entry_;
  const void* impl_;
  int device_;
};

// Resolves `name` (a kernel or a tuning candidate) for the calling thread's
// current device at each launch. NOT_FOUND if no registered library knows
// it; FAILED_PRECONDITION if this build cannot run it.
absl::StatusOr<KernelHandle> ResolveKernel(absl::string_view name);

// Resolves `name` for `device` (as GetCudaDevice or ListCudaDevices return
// it): a GPU kernel's family is chosen for the device's compute capability,
// a tuned step's candidate for its name, and the launch attributes of every
// variant are set on it here, once. FAILED_PRECONDITION when the kernel
// cannot run on the device. The CPU kernel ignores `device`.
absl::StatusOr<KernelHandle> ResolveKernel(absl::string_view name, const DeviceInfo& device);

// Resolves, validates, then runs kernel `kernel_name` on `args`. Prefer a
// KernelHandle on hot paths.
absl::Status Forward(const AttentionArgs& args, absl::string_view kernel_name,
                     CUstream_st* stream = nullptr);

}  // namespace attn

#endif  // ATTN_ATTENTION_H_
