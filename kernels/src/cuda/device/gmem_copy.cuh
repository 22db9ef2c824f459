// CTA-wide copies between global memory and shared-memory tiles of
// [kRows x kHeadDim] 16-bit elements. kThreads threads cover kThreads / 16
// rows per step, one 16-byte chunk each, so a warp moves two full 256-byte
// rows per instruction (coalesced).
#ifndef ATTN_KERNELS_SRC_CUDA_DEVICE_GMEM_COPY_CUH_
#define ATTN_KERNELS_SRC_CUDA_DEVICE_GMEM_COPY_CUH_

#include <cstdint>

#include "device/ptx.cuh"
#include "device/smem_tile.cuh"

namespace attn::fa2 {

template <int kRows, int kThreads, bool kSwizzle>
struct TileCopy {
  static constexpr int kRowsPerStep = kThreads / kChunksPerRow;
  static_assert(kThreads % kChunksPerRow == 0, "threads must cover whole rows");
  static_assert(kRowsPerStep % 8 == 0, "row steps must keep the swizzle pattern");
  static_assert(kRows % kRowsPerStep == 0, "tile rows must be a multiple of a copy step");

  // Issues cp.async for the whole tile (the caller commits and waits).
  // `gmem` points at the tile's first element; rows are `row_stride` apart.
  template <class T>
  __device__ __forceinline__ static void LoadAsync(uint32_t smem_tile, const T* gmem,
                                                   int64_t row_stride, int tid) {
    const int row0 = tid / kChunksPerRow;
    const int chunk = tid % kChunksPerRow;
    const T* src = gmem + row0 * row_stride + chunk * kChunkElems;
    const uint32_t dst = smem_tile + SmemTile<kSwizzle>::ChunkOffset(row0, chunk);
#pragma unroll
    for (int i = 0; i < kRows / kRowsPerStep; ++i) {
      CpAsync16(dst + i * kRowsPerStep * kRowBytes, src + i * kRowsPerStep * row_stride);
    }
  }

  // Copies the tile back to global memory with 16-byte stores. The caller
  // synchronises the CTA between the shared-memory writes and this call.
  template <class T>
  __device__ __forceinline__ static void Store(T* gmem, int64_t row_stride, uint32_t smem_tile,
                                               int tid) {
    const int row0 = tid / kChunksPerRow;
    const int chunk = tid % kChunksPerRow;
    T* dst = gmem + row0 * row_stride + chunk * kChunkElems;
    const uint32_t src = smem_tile + SmemTile<kSwizzle>::ChunkOffset(row0, chunk);
#pragma unroll
    for (int i = 0; i < kRows / kRowsPerStep; ++i) {
      StGlobal128(dst + i * kRowsPerStep * row_stride, LdShared128(src + i * kRowsPerStep * kRowBytes));
    }
  }
};

}  // namespace attn::fa2

#endif  // ATTN_KERNELS_SRC_CUDA_DEVICE_GMEM_COPY_CUH_
