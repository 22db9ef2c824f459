#include "attn/c_api.h"

#include <cstring>
#include <string>

#include "attn/attention.h"

namespace {

int Report(const absl::Status& status, char* error, size_t error_size) {
  if (error != nullptr && error_size > 0) {
    const std::string message(status.message());
    const size_t n = std::min(message.size(), error_size - 1);
    std::memcpy(error, message.data(), n);
    error[n] = '\0';
  }
  return static_cast<int>(status.code());
}

}  // namespace

extern "C" int attn_forward(const char* kernel, int dtype, const void* q, const void* k,
                            const void* v, void* out, int64_t batch, int64_t seq_len,
                            int64_t num_heads, int64_t head_dim, float softmax_scale,
                            void* stream, char* error, size_t error_size) {
  if (kernel == nullptr) {
    return Report(absl::InvalidArgumentError("kernel is NULL"), error, error_size);
  }
  if (dtype != ATTN_DTYPE_FLOAT16 && dtype != ATTN_DTYPE_BFLOAT16) {
    return Report(absl::InvalidArgumentError("dtype must be ATTN_DTYPE_FLOAT16 (0) or "
                                             "ATTN_DTYPE_BFLOAT16 (1)"),
                  error, error_size);
  }
  const attn::DType type = dtype == ATTN_DTYPE_BFLOAT16 ? attn::DType::kBFloat16
                                                        : attn::DType::kFloat16;
  attn::AttentionProblem problem =
      attn::AttentionProblem::SelfAttention(batch, seq_len, num_heads, head_dim);
  problem.softmax_scale = softmax_scale;
  const attn::AttentionArgs args = attn::AttentionArgs::Contiguous(problem, type, q, k, v, out);
  return Report(attn::Forward(args, kernel, static_cast<CUstream_st*>(stream)), error,
                error_size);
}

extern "C" size_t attn_list_kernels(int include_candidates, char* buffer, size_t size) {
  std::string names;
  for (const attn::KernelInfo& k : attn::ListKernels()) names += k.name + "\n";
  if (include_candidates != 0) {
    for (const attn::KernelInfo& k : attn::ListTuningCandidates()) names += k.name + "\n";
  }
  if (buffer != nullptr && size > 0) {
    const size_t n = std::min(names.size(), size - 1);
    std::memcpy(buffer, names.data(), n);
    buffer[n] = '\0';
  }
  return names.size() + 1;
}

extern "C" int attn_kernel_step(const char* kernel) {
  if (kernel == nullptr) return -1;
  absl::StatusOr<attn::KernelInfo> info = attn::FindKernel(kernel);
  return info.ok() ? info->ladder_step : -1;
}
