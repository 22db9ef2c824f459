// Shared-memory tiles of kHeadDim 16-bit columns. A row holds kHeadDim / 8
// 16-byte chunks; its pitch is kHeadDim rounded up to 64 elements (a multiple
// of 128 bytes, so every row starts at bank 0: head_dim 96 rows are padded to
// 256 bytes). With kSwizzle, chunk c of row r is stored at chunk c ^ (r % 8):
// the 8 rows one ldmatrix phase (or one cp.async wavefront) touches then hit
// 8 different 4-bank groups instead of the same one (ladder step 2). The XOR
// only flips the low 3 bits, so a chunk stays in its 128-byte group, and rows
// that differ by a multiple of 8 share a pattern — the reason every
// per-thread row offset below is a multiple of 8.
#ifndef ATTN_KERNELS_SRC_CUDA_DEVICE_SMEM_TILE_CUH_
#define ATTN_KERNELS_SRC_CUDA_DEVICE_SMEM_TILE_CUH_

#include <cstdint>

namespace attn::fa2 {

inline constexpr int kChunkBytes = 16;
inline constexpr int kChunkElems = 8;  // 16-bit elements per chunk

template <int kHeadDim>
struct TileGeometry {
  static_assert(kHeadDim % 16 == 0, "head_dim must be a multiple of 16 (mma k-slices)");
  static constexpr int kChunksPerRow = kHeadDim / kChunkElems;  // chunks holding data
  static constexpr int kRowElems = (kHeadDim + 63) / 64 * 64;   // pitch in elements
  static constexpr int kRowBytes = kRowElems * 2;
};

template <bool kSwizzle, int kRowBytes>
struct SmemTile {
  // Byte offset of 16-byte chunk `chunk` of row `row` from the tile's start.
  __device__ __forceinline__ static constexpr uint32_t ChunkOffset(int row, int chunk) {
    const int stored = kSwizzle ? (chunk ^ (row & 7)) : chunk;
    return static_cast<uint32_t>(row * kRowBytes + stored * kChunkBytes);
  }
};

}  // namespace attn::fa2

#endif  // ATTN_KERNELS_SRC_CUDA_DEVICE_SMEM_TILE_CUH_
