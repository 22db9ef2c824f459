// attn/attention.h
//
// The kernel library's entry point: a registry of attention kernels and one
// Forward() that validates arguments and runs a kernel by name.
//
// Kernels:
//   * "cpu_reference": fp32-accumulating, multi-threaded, tiled CPU attention
//     with an online softmax. Host pointers. Any head_dim up to
//     kMaxCpuHeadDim, any seq_len. Runs synchronously; `stream` is ignored.
//   * The FlashAttention-2 ladder ("k01_base" ... ), in ladder order. Device
//     pointers, head_dim 128, seq_len a multiple of the kernel's block sizes,
//     every pointer 16-byte aligned. Asynchronous on `stream`: Forward returns
//     once the launch is queued; errors of the launch itself are reported,
//     errors during execution surface at the next synchronisation.
//
// Errors: INVALID_ARGUMENT for arguments a kernel cannot take (the message
// names the field and the rule; nothing is launched), NOT_FOUND for an unknown
// kernel name, FAILED_PRECONDITION when a GPU kernel is asked for in a build or
// on a host without CUDA, INTERNAL for CUDA runtime failures.
#ifndef ATTN_ATTENTION_H_
#define ATTN_ATTENTION_H_

#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "attn/tensor.h"

// CUDA's stream handle type, declared the way cuda_runtime.h declares it, so
// this header needs no CUDA headers (cudaStream_t converts implicitly).
struct CUstream_st;

namespace attn {

enum class Backend : int { kCpu = 0, kCuda = 1 };

inline constexpr int64_t kMaxCpuHeadDim = 512;
inline constexpr char kCpuKernelName[] = "cpu_reference";

struct KernelInfo {
  std::string name;         // stable identifier, e.g. "k07_autotuned"
  int ladder_step = 0;      // 1..16 on the FA2 ladder; 0 for the CPU reference
  std::string description;  // one line: what this step adds
  Backend backend = Backend::kCpu;
  int head_dim = 0;      // the only head_dim accepted; 0 = any up to kMaxCpuHeadDim
  int seq_multiple = 1;  // seq_len must be a positive multiple of this
  int block_m = 0;       // query rows per CTA (GPU kernels)
  int block_n = 0;       // key/value rows per main-loop step (GPU kernels)
  int num_warps = 0;     // warps per CTA (GPU kernels)
};

// Every kernel this build can run: the CPU reference first, then the GPU
// ladder in step order (empty GPU part without CUDA). Tile sizes of tuned
// kernels are those chosen for the current CUDA device.
std::vector<KernelInfo> ListKernels();

// The candidates "k07_autotuned" chooses among (ladder step 7), named
// "k07/<shape>", e.g. "k07/128x64_w4_sliced_db". Runnable by name like any
// kernel; attn_tune times them to write the tuning table (attn/tuning.h).
std::vector<KernelInfo> ListTuningCandidates();

// The kernel or tuning candidate named `name`, or NOT_FOUND listing the
// known kernel names.
absl::StatusOr<KernelInfo> FindKernel(absl::string_view name);

// The fastest GPU kernel for the current device (the last ladder step), or
// the CPU reference in a build or on a host without CUDA.
KernelInfo DefaultKernel();

// Checks `args` against the rules of `kernel` without running anything.
absl::Status ValidateArgs(const AttentionArgs& args, const KernelInfo& kernel);

// Validates, then runs kernel `kernel_name` on `args`.
absl::Status Forward(const AttentionArgs& args, absl::string_view kernel_name,
                     CUstream_st* stream = nullptr);

}  // namespace attn

#endif  // ATTN_ATTENTION_H_
