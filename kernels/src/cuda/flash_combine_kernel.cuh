// The split-KV combine (flash-decoding's second kernel): reduces the
// num_splits partial outputs FlashFwdKernel<..., kSplit = true> wrote to the
// workspace into O and the LSE, exactly:
//   LSE = log Σ_s exp(LSE_s),   O = Σ_s exp(LSE_s − LSE) · O_s
// (each O_s normalised by its own split's sum). A split that saw no key has
// LSE_s = −inf and weight 0; a row no split saw ends with O = 0 and LSE −inf,
// as the one-pass kernel leaves it.
//
// One warp per row (rows indexed as the LSE is), kRowsPerCta rows per CTA;
// lanes stride over head_dim, so every load and store is coalesced.
#ifndef ATTN_KERNELS_SRC_CUDA_FLASH_COMBINE_KERNEL_CUH_
#define ATTN_KERNELS_SRC_CUDA_FLASH_COMBINE_KERNEL_CUH_

#include <cmath>
#include <cstdint>

#include "device/ptx.cuh"
#include "fwd_params.h"

namespace attn::fa2 {

inline constexpr int kCombineRowsPerCta = 4;

// Elements from O's start to the first element of LSE row `row`.
__device__ __forceinline__ int64_t CombineOutputOffset(const FwdParams& p, int64_t row) {
  if (p.cu_seqlens_q != nullptr) {  // [heads_q, total_q]: token t of head h
    const int64_t h = row / p.total_q;
    const int64_t t = row % p.total_q;
    return t * p.o_row_stride + h * p.o_head_stride;
  }
  const int64_t q = row % p.seqlen_q;  // [batch, heads_q, seqlen_q]
  const int64_t h = (row / p.seqlen_q) % p.heads_q;
  const int64_t b = row / (static_cast<int64_t>(p.seqlen_q) * p.heads_q);
  return b * p.o_batch_stride + q * p.o_row_stride + h * p.o_head_stride;
}

template <class T, int kHeadDim>
__global__ void __launch_bounds__(32 * kCombineRowsPerCta)
    FlashCombineKernel(const __grid_constant__ FwdParams p) {
  const int lane = threadIdx.x % 32;
  const int64_t row = static_cast<int64_t>(blockIdx.x) * kCombineRowsPerCta + threadIdx.x / 32;
  if (row >= p.lse_rows) return;
  float max_lse = -INFINITY;
  for (int s = 0; s < p.num_splits; ++s) max_lse = fmaxf(max_lse, p.lse_accum[s * p.lse_rows + row]);
  float sum = 0.0f;
  if (max_lse != -INFINITY) {
    for (int s = 0; s < p.num_splits; ++s) sum += __expf(p.lse_accum[s * p.lse_rows + row] - max_lse);
  }
  const float lse = sum > 0.0f ? max_lse + __logf(sum) : -INFINITY;
  T* out = static_cast<T*>(p.o) + CombineOutputOffset(p, row);
  constexpr int kPerLane = (kHeadDim + 31) / 32;
  float acc[kPerLane];
#pragma unroll
  for (int i = 0; i < kPerLane; ++i) acc[i] = 0.0f;
  if (lse != -INFINITY) {
    for (int s = 0; s < p.num_splits; ++s) {
      const float w = __expf(p.lse_accum[s * p.lse_rows + row] - lse);
      if (w == 0.0f) continue;
      const float* part = p.o_accum + (s * p.lse_rows + row) * kHeadDim;
#pragma unroll
      for (int i = 0; i < kPerLane; ++i) {
        const int c = lane + 32 * i;
        if (kHeadDim % 32 == 0 || c < kHeadDim) acc[i] = fmaf(w, part[c], acc[i]);
      }
    }
  }
#pragma unroll
  for (int i = 0; i < kPerLane; ++i) {
    const int c = lane + 32 * i;
    if (kHeadDim % 32 == 0 || c < kHeadDim) out[c] = FromFloat<T>(acc[i]);
  }
  if (p.lse != nullptr && lane == 0) p.lse[row] = lse;
}

}  // namespace attn::fa2

#endif  // ATTN_KERNELS_SRC_CUDA_FLASH_COMBINE_KERNEL_CUH_
