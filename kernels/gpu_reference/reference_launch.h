// Launchers of the device-side test helpers (gpu_reference.cu), wrapped with
// absl::Status by gpu_reference.cc.
#ifndef ATTN_KERNELS_SRC_CUDA_REFERENCE_LAUNCH_H_
#define ATTN_KERNELS_SRC_CUDA_REFERENCE_LAUNCH_H_

#include <cuda_runtime_api.h>

#include <cstdint>

namespace attn::fa2 {

inline constexpr int kMaxHeadDim = 256;

// One naive attention call (see AttentionGpuReference). Strides in elements;
// window bounds with causal already folded in (-1: unbounded).
struct ReferenceParams {
  const void* q = nullptr;
  const void* k = nullptr;
  const void* v = nullptr;
  float* out = nullptr;  // dense [tokens_q, heads_q, head_dim]
  float* lse = nullptr;  // optional: [batch, heads_q, seqlen_q] or varlen [heads_q, total_q]
  const int32_t* cu_seqlens_q = nullptr;  // varlen only
  const int32_t* cu_seqlens_k = nullptr;
  int64_t q_batch_stride = 0, q_row_stride = 0, q_head_stride = 0;
  int64_t k_batch_stride = 0, k_row_stride = 0, k_head_stride = 0;
  int64_t v_batch_stride = 0, v_row_stride = 0, v_head_stride = 0;
  int batch = 0, seqlen_q = 0, seqlen_k = 0, heads_q = 0, heads_kv = 0, head_dim = 0;
  int64_t total_q = 0;
  int64_t window_left = -1, window_right = -1;
  float scale = 0.0f;
  bool varlen = false;
  bool bf16 = true;
};

cudaError_t LaunchReferenceAttention(const ReferenceParams& params, cudaStream_t stream);

cudaError_t LaunchFillRandomNormal(void* data, int64_t count, uint64_t seed, bool bf16,
                                   cudaStream_t stream);

}  // namespace attn::fa2

#endif  // ATTN_KERNELS_SRC_CUDA_REFERENCE_LAUNCH_H_
