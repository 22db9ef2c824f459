// Shared-memory tiles of [kRows x kHeadDim] 16-bit elements, in 16-byte
// chunks (kHeadDim / 8 per row).
//
// Row layout (ladder steps 1–14): each row holds the whole head_dim, its
// pitch rounded up to 64 elements (a multiple of 128 bytes, so every row
// starts at bank 0; head_dim 96 rows are padded to 256 bytes).
// Column pages (step 15, FA2's layout atom): head_dim / 64 pages of
// [kRows x 64] placed back to back, each row 128 bytes.
//
// With kSwizzle (step 2), chunk c of row r is stored at chunk c ^ (r % 8)
// within its 128-byte group: the 8 rows one ldmatrix phase (or one cp.async
// wavefront) touches then hit 8 different 4-bank groups instead of the same
// one. The XOR only flips the low 3 bits, so a chunk stays in its group, and
// rows that differ by a multiple of 8 share a pattern — the reason every
// per-thread row offset in the copies and operand loads is a multiple of 8.
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
  static constexpr int kRowElems = (kHeadDim + 63) / 64 * 64;   // padded row, elements
  static constexpr int kRowBytes = kRowElems * 2;                // bytes per row of a tile
};

template <int kHeadDim, int kRows, bool kSwizzle, bool kColumnPages>
struct SmemTile {
  using Geometry = TileGeometry<kHeadDim>;
  static constexpr int kChunksPerRow = Geometry::kChunksPerRow;
  // Bytes between consecutive rows, and between column pages.
  static constexpr int kRowPitch = kColumnPages ? 128 : Geometry::kRowBytes;
  static constexpr int kPageBytes = kRows * 128;
  static constexpr int kBytes = kRows * Geometry::kRowBytes;

  // The row-independent part of chunk `chunk`'s offset: its 128-byte group
  // (a page, or a group within the row).
  __device__ __forceinline__ static constexpr uint32_t GroupOffset(int chunk) {
    return kColumnPages ? static_cast<uint32_t>((chunk / 8) * kPageBytes)
                        : static_cast<uint32_t>((chunk & ~7) * kChunkBytes);
  }
  // Swizzled position of chunk `chunk` within its group, for row `row`.
  __device__ __forceinline__ static constexpr int InGroup(int row, int chunk) {
    return kSwizzle ? ((chunk & 7) ^ (row & 7)) : (chunk & 7);
  }
  // Byte offset of 16-byte chunk `chunk` of row `row` from the tile's start.
  __device__ __forceinline__ static constexpr uint32_t ChunkOffset(int row, int chunk) {
    return static_cast<uint32_t>(row * kRowPitch) + GroupOffset(chunk) +
           static_cast<uint32_t>(InGroup(row, chunk) * kChunkBytes);
  }
};

}  // namespace attn::fa2

#endif  // ATTN_KERNELS_SRC_CUDA_DEVICE_SMEM_TILE_CUH_
