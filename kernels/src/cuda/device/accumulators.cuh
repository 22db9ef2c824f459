// Accumulator helpers shared by the families' kernels (mma.sync and wgmma
// accumulators share their fragment layout: device/wgmma.cuh).
#ifndef ATTN_KERNELS_SRC_CUDA_DEVICE_ACCUMULATORS_CUH_
#define ATTN_KERNELS_SRC_CUDA_DEVICE_ACCUMULATORS_CUH_

namespace attn::fa2 {

// Zeroes a warp's mma accumulators (rows of m16 tiles x n8 tiles x 4 floats).
template <int kRows, int kCols>
__device__ __forceinline__ void ClearAccumulators(float (&acc)[kRows][kCols][4]) {
#pragma unroll
  for (int r = 0; r < kRows; ++r)
#pragma unroll
    for (int c = 0; c < kCols; ++c)
#pragma unroll
      for (int i = 0; i < 4; ++i) acc[r][c][i] = 0.0f;
}

}  // namespace attn::fa2

#endif  // ATTN_KERNELS_SRC_CUDA_DEVICE_ACCUMULATORS_CUH_
