// The split-KV combine (flash-decoding's second kernel): reduces the
// num_splits partial outputs FlashFwdKernel<..., kSplit = true> wrote to the
// workspace into O and the LSE, exactly:
//   LSE = log Σ_s exp(LSE_s),   O = Σ_s exp(LSE_s − LSE) · O_s
// (each O_s normalised by its own split's sum). A split that saw no key has
// LSE_s = −inf and weight 0; a row no split saw ends with O = 0 and LSE −inf,
// as the one-pass kernel leaves it.
//
// One CTA per row (rows indexed as the LSE is), of CombineWarps(num_splits)
// warps. Warp 0 reads the row's split LSEs a lane each and leaves the
// weights in shared memory; then each warp sums every warps-th split's
// partial O, a lane holding head_dim / 32 adjacent columns, and the warps'
// sums are added through shared memory. A warp's loads are independent of
// each other and it has at most kCombineSplitsPerWarp of them, so a long
// split list (one sequence of 131072 keys in 128 splits) is read in about one
// memory latency rather than split after split: the few rows of such a
// problem leave most SMs idle, and the combine is latency, not bandwidth.
//
// Launched as a programmatic dependent of the split kernel where the device
// has it (FwdParams::dependent_combine): its CTAs start while the split
// kernel's last CTAs run and wait in GridDependencyWait for its results,
// which hides the second launch's gap.
#ifndef ATTN_KERNELS_SRC_CUDA_FLASH_COMBINE_KERNEL_CUH_
#define ATTN_KERNELS_SRC_CUDA_FLASH_COMBINE_KERNEL_CUH_

#include <cmath>
#include <cstdint>

#include "attn/problem.h"
#include "device/ptx.cuh"
#include "fwd_params.h"

namespace attn::fa2 {

inline constexpr int kCombineMaxWarps = 16;
inline constexpr int kCombineSplitsPerWarp = 8;

// Warps of the combine CTA for `num_splits` splits.
inline int CombineWarps(int num_splits) {
  const int warps = (num_splits + kCombineSplitsPerWarp - 1) / kCombineSplitsPerWarp;
  return warps < 1 ? 1 : warps > kCombineMaxWarps ? kCombineMaxWarps : warps;
}

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
__global__ void __launch_bounds__(32 * kCombineMaxWarps)
    FlashCombineKernel(const __grid_constant__ FwdParams p) {
  static_assert(kHeadDim % 32 == 0, "a lane holds head_dim / 32 columns");
  static_assert(kMaxSplits <= kCombineMaxWarps * kCombineSplitsPerWarp,
                "CombineWarps covers every split in one pass");
  constexpr int kPerLane = kHeadDim / 32;
  __shared__ float weight[kMaxSplits];
  __shared__ float row_lse;
  __shared__ float partial[kCombineMaxWarps][kHeadDim];
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
  const int warps = blockDim.x / 32;
  const int64_t row = blockIdx.x;
  GridDependencyWait();  // the split kernel's partials are complete and visible
  if (warp == 0) {
    float lse_s[kMaxSplits / 32];
    float max_lse = -INFINITY;
#pragma unroll
    for (int i = 0; i < kMaxSplits / 32; ++i) {
      const int s = lane + 32 * i;
      lse_s[i] = s < p.num_splits ? p.lse_accum[s * p.lse_rows + row] : -INFINITY;
      max_lse = fmaxf(max_lse, lse_s[i]);
    }
#pragma unroll
    for (int offset = 16; offset > 0; offset /= 2) {
      max_lse = fmaxf(max_lse, __shfl_xor_sync(0xffffffffu, max_lse, offset));
    }
    float sum = 0.0f;
    if (max_lse != -INFINITY) {
#pragma unroll
      for (int i = 0; i < kMaxSplits / 32; ++i) sum += __expf(lse_s[i] - max_lse);
    }
#pragma unroll
    for (int offset = 16; offset > 0; offset /= 2) {
      sum += __shfl_xor_sync(0xffffffffu, sum, offset);
    }
    const float lse = sum > 0.0f ? max_lse + __logf(sum) : -INFINITY;
    // A split that saw no key (and every split of a row none saw) weighs 0;
    // its partial may be anything, so it is never multiplied in.
#pragma unroll
    for (int i = 0; i < kMaxSplits / 32; ++i) {
      weight[lane + 32 * i] = lse == -INFINITY ? 0.0f : __expf(lse_s[i] - lse);
    }
    if (lane == 0) row_lse = lse;
  }
  __syncthreads();
  float acc[kPerLane];
#pragma unroll
  for (int i = 0; i < kPerLane; ++i) acc[i] = 0.0f;
  // Every load first (predicated, none waits on another), then the sums.
  float w[kCombineSplitsPerWarp];
  float x[kCombineSplitsPerWarp][kPerLane];
#pragma unroll
  for (int j = 0; j < kCombineSplitsPerWarp; ++j) {
    const int s = warp + j * warps;
    const bool valid = s < p.num_splits;
    w[j] = valid ? weight[s] : 0.0f;
    const float* part = p.o_accum + (s * p.lse_rows + row) * kHeadDim + lane * kPerLane;
#pragma unroll
    for (int i = 0; i < kPerLane; ++i) x[j][i] = valid ? part[i] : 0.0f;
  }
#pragma unroll
  for (int j = 0; j < kCombineSplitsPerWarp; ++j) {
#pragma unroll
    for (int i = 0; i < kPerLane; ++i) acc[i] = w[j] != 0.0f ? fmaf(w[j], x[j][i], acc[i]) : acc[i];
  }
#pragma unroll
  for (int i = 0; i < kPerLane; ++i) partial[warp][lane * kPerLane + i] = acc[i];
  __syncthreads();
  T* out = static_cast<T*>(p.o) + CombineOutputOffset(p, row);
  for (int c = threadIdx.x; c < kHeadDim; c += blockDim.x) {
    float total = 0.0f;
    for (int w = 0; w < warps; ++w) total += partial[w][c];
    out[c] = FromFloat<T>(total);
  }
  if (p.lse != nullptr && threadIdx.x == 0) p.lse[row] = row_lse;
}

}  // namespace attn::fa2

#endif  // ATTN_KERNELS_SRC_CUDA_FLASH_COMBINE_KERNEL_CUH_
