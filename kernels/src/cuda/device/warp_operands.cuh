// Loads of mma.m16n8k16 operands from the shared-memory tiles, one warp at a
// time, with ldmatrix .x4 (four 8x8 matrices per instruction). The lane ->
// row/chunk maps put the four matrices in the registers in the order the mma
// consumes them, so no register moves are needed (see ptx.cuh for the
// fragment layouts).
//
// Every address is tile + (row0 + lane's row) * pitch + chunk bytes, with the
// lane-dependent parts computed once per thread. Rows step by multiples of 8,
// which keep the swizzle pattern, so only the chunk index needs the XOR:
// (2c + bit) ^ (row % 8) == 2c ^ (bit ^ (row % 8)), one XOR with a constant
// (or none with signed strides, step 8).
#ifndef ATTN_KERNELS_SRC_CUDA_DEVICE_WARP_OPERANDS_CUH_
#define ATTN_KERNELS_SRC_CUDA_DEVICE_WARP_OPERANDS_CUH_

#include <cstdint>

#include "device/ptx.cuh"
#include "device/smem_tile.cuh"

namespace attn::fa2 {

template <class QTile, class KVTile, bool kSignedStrides>
class WarpOperands {
  static_assert(QTile::kRowPitch == KVTile::kRowPitch, "Q and K/V tiles share a row layout");

 public:
  __device__ __forceinline__ explicit WarpOperands(int lane)
      : a_(Lane(lane & 15, lane >> 4)),
        b_rows_(Lane((lane & 7) + ((lane >> 4) << 3), (lane >> 3) & 1)),
        b_cols_(Lane((lane & 7) + (((lane >> 3) & 1) << 3), lane >> 4)) {}

  // A operand (16 x 16) from a row-major tile (Q): rows row0..row0+15,
  // columns 16ks..16ks+15. Matrices: (rows 0-7 | 8-15) x (cols 0-7 | 8-15)
  // -> a0, a1, a2, a3.
  __device__ __forceinline__ void LoadA(uint32_t (&a)[4], uint32_t tile, int row0, int ks) const {
    LdMatrixX4(a, tile + a_.template Address<QTile>(row0, ks));
  }

  // B operands of two n8 tiles for S = Q·Kᵀ, from a row-major K tile: keys
  // n0..n0+15 (B's n), head dims 16ks..16ks+15 (B's k). b[0], b[1] are b0, b1
  // of keys n0..n0+7; b[2], b[3] those of keys n0+8..n0+15.
  __device__ __forceinline__ void LoadBFromRows(uint32_t (&b)[4], uint32_t tile, int n0,
                                                int ks) const {
    LdMatrixX4(b, tile + b_rows_.template Address<KVTile>(n0, ks));
  }

  // B operands of two n8 tiles for O += P·V, from a row-major V tile read
  // transposed: keys 16ks..16ks+15 (B's k), head dims 16dp..16dp+15 (B's n).
  // b[0], b[1] are b0, b1 of dims 16dp..+7; b[2], b[3] those of 16dp+8..+15.
  __device__ __forceinline__ void LoadBFromColumns(uint32_t (&b)[4], uint32_t tile, int ks,
                                                   int dp) const {
    LdMatrixX4Trans(b, tile + b_cols_.template Address<KVTile>(16 * ks, dp));
  }

 private:
  // One lane's part of an ldmatrix address: its row within the 16-row
  // operand and the chunk bit it reads (chunk 2c + bit of column pair c),
  // pre-XORed with its row's swizzle: cb = bit ^ (row % 8).
  //
  // Chunk 2c + bit sits in group (2c) / 8 at position ((2c) % 8) ^ cb. With
  // kSignedStrides (ladder step 8) that position is cb plus one of four
  // per-lane signed deltas ((cb ^ r) − cb for r = 0, 2, 4, 6), picked at
  // compile time from c, so the address is one add of a base, a delta and an
  // immediate; otherwise one XOR per load computes it.
  struct Lane {
    __device__ __forceinline__ Lane(int row, int chunk_bit)
        : row_bytes(static_cast<uint32_t>(row * QTile::kRowPitch)),
          chunk_bits(QTile::InGroup(row, chunk_bit)) {
      if constexpr (kSignedStrides) {
        row_bytes += static_cast<uint32_t>(chunk_bits * kChunkBytes);
#pragma unroll
        for (int r = 1; r < 4; ++r) {
          delta[r - 1] = static_cast<int32_t>(((chunk_bits ^ (2 * r)) - chunk_bits) * kChunkBytes);
        }
      }
    }
    // Address offset of (row0 + row, chunk 2c + chunk_bit); row0 % 8 == 0.
    template <class Tile>
    __device__ __forceinline__ uint32_t Address(int row0, int c) const {
      const uint32_t fixed = static_cast<uint32_t>(row0 * Tile::kRowPitch) + Tile::GroupOffset(2 * c);
      if constexpr (kSignedStrides) {
        const int r = (2 * c) & 7;
        return row_bytes + fixed + (r == 0 ? 0u : static_cast<uint32_t>(delta[r / 2 - 1]));
      } else {
        return row_bytes + fixed + static_cast<uint32_t>((((2 * c) & 7) ^ chunk_bits) * kChunkBytes);
      }
    }
    uint32_t row_bytes;
    int chunk_bits;
    int32_t delta[kSignedStrides ? 3 : 1];
  };

  Lane a_;
  Lane b_rows_;
  Lane b_cols_;
};

// Runs a GEMM's reduction as kSlices steps of Load(slice, fragments) then
// Mma(slice, fragments), in one of the ladder's three orders:
//   whole (kSliced = false): every slice is loaded before the first mma;
//   sliced (step 4): each slice is loaded right before its mma's;
//   double-buffered (step 5): slice s+1 is loaded before the mma's of slice s,
//   so shared-memory latency hides behind tensor work.
template <int kSlices, bool kSliced, bool kDoubleBuffer, class Fragments, class LoadFn,
          class MmaFn>
__device__ __forceinline__ void RunSlices(LoadFn&& load, MmaFn&& mma) {
  if constexpr (!kSliced) {
    Fragments f[kSlices];
#pragma unroll
    for (int s = 0; s < kSlices; ++s) load(s, f[s]);
#pragma unroll
    for (int s = 0; s < kSlices; ++s) mma(s, f[s]);
  } else if constexpr (!kDoubleBuffer) {
#pragma unroll
    for (int s = 0; s < kSlices; ++s) {
      Fragments f;
      load(s, f);
      mma(s, f);
    }
  } else {
    Fragments f[2];
    load(0, f[0]);
#pragma unroll
    for (int s = 0; s < kSlices; ++s) {
      if (s + 1 < kSlices) load(s + 1, f[(s + 1) & 1]);
      mma(s, f[s & 1]);
    }
  }
}

}  // namespace attn::fa2

#endif  // ATTN_KERNELS_SRC_CUDA_DEVICE_WARP_OPERANDS_CUH_
