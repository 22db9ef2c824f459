// CTA-wide copies between global memory and a shared-memory tile (Tile, an
// SmemTile: [kRows x kHeadDim] 16-bit elements), 16-byte chunks per thread. When the
// threads cover whole rows (kThreads a multiple of the chunks per row, in row
// steps that keep the swizzle pattern), each thread keeps one chunk column
// and steps down the rows (a warp moves whole rows per instruction,
// coalesced). Otherwise (head_dim 96 or 192) the chunks are dealt out in
// order, row and chunk computed per step — except at 4 warps (128 threads),
// where rows of 12 chunks are walked as if padded to 16, the threads of the
// padding chunks idle: dealt out, each thread's chunks have a different row
// and column every step, and their addresses beside a 4-warp tile's
// accumulators spill. Measured on an H100 (bench/RESULTS.md, eighteenth
// run): head_dim 96 at 128x64 with 4 warps and the padded walk 352 TFLOP/s
// (1.01x FA2), where 8 warps ran 262 dealt out and 247 padded; head_dim 192
// at 8 warps 314 dealt out, 305 padded.
//
// kPredicated: rows at or past `valid_rows` are not read (their shared
// memory is zero-filled by cp.async's src-size operand) and not written —
// the ragged tails of sequences whose length is not a multiple of the block.
#ifndef ATTN_KERNELS_SRC_CUDA_DEVICE_GMEM_COPY_CUH_
#define ATTN_KERNELS_SRC_CUDA_DEVICE_GMEM_COPY_CUH_

#include <cstdint>

#include "device/ptx.cuh"
#include "device/smem_tile.cuh"

namespace attn::fa2 {

template <int kRows, int kThreads, class Tile>
struct TileCopy {
  static constexpr int kChunksPerRow = Tile::kChunksPerRow;
  static constexpr bool kWholeRows =
      kThreads % kChunksPerRow == 0 && (kThreads / kChunksPerRow) % 8 == 0 &&
      kRows % (kThreads / kChunksPerRow) == 0;
  // The whole-rows walk over rows padded to a power-of-two chunk count.
  static constexpr int kPaddedChunks = kChunksPerRow <= 8 ? 8 : kChunksPerRow <= 16 ? 16 : 32;
  static constexpr bool kPaddedRows =
      !kWholeRows && kThreads == 128 && kPaddedChunks >= kChunksPerRow &&
      kThreads % kPaddedChunks == 0 &&
      (kThreads / kPaddedChunks) % 8 == 0 && kRows % (kThreads / kPaddedChunks) == 0;
  static constexpr int kTotalChunks = kRows * kChunksPerRow;
  static constexpr int kSteps = (kTotalChunks + kThreads - 1) / kThreads;

  // Calls fn(row, smem_offset, gmem) for each chunk this thread moves, with
  // `gmem` pointing at that chunk (rows `row_stride` apart).
  template <class T, class Fn>
  __device__ __forceinline__ static void ForEachChunk(int tid, T* gmem, int64_t row_stride,
                                                      Fn&& fn) {
    if constexpr (kWholeRows || kPaddedRows) {
      constexpr int kStepChunks = kWholeRows ? kChunksPerRow : kPaddedChunks;
      constexpr int kRowsPerStep = kThreads / kStepChunks;
      const int row0 = tid / kStepChunks;
      const int chunk = tid % kStepChunks;
      if (!kWholeRows && chunk >= kChunksPerRow) return;  // a padding chunk
      const uint32_t offset0 = Tile::ChunkOffset(row0, chunk);
      T* src = gmem + row0 * row_stride + chunk * kChunkElems;
#pragma unroll
      for (int i = 0; i < kRows / kRowsPerStep; ++i) {
        fn(row0 + i * kRowsPerStep, offset0 + i * kRowsPerStep * Tile::kRowPitch,
           src + i * kRowsPerStep * row_stride);
      }
    } else {
#pragma unroll
      for (int i = 0; i < kSteps; ++i) {
        const int idx = tid + i * kThreads;
        if (kTotalChunks % kThreads == 0 || idx < kTotalChunks) {
          const int row = idx / kChunksPerRow;
          const int chunk = idx % kChunksPerRow;
          fn(row, Tile::ChunkOffset(row, chunk), gmem + row * row_stride + chunk * kChunkElems);
        }
      }
    }
  }

  // Calls fn(row, smem_offset, chunk) for each chunk this thread moves:
  // the chunk's index within its row, for tiles whose rows are not evenly
  // spaced in global memory (GQA-packed Q and O: RowsAsync, StoreRows).
  template <class Fn>
  __device__ __forceinline__ static void ForEachRowChunk(int tid, Fn&& fn) {
#pragma unroll
    for (int i = 0; i < kSteps; ++i) {
      const int idx = tid + i * kThreads;
      if (kTotalChunks % kThreads == 0 || idx < kTotalChunks) {
        const int row = idx / kChunksPerRow;
        const int chunk = idx % kChunksPerRow;
        fn(row, Tile::ChunkOffset(row, chunk), chunk);
      }
    }
  }

  // LoadAsync for rows anywhere: `row_start(row)` points at row `row`'s
  // first element, or is null for a row to zero-fill (a page out of range);
  // rows at or past `valid_rows` read nothing (zero-filled). row_start is
  // called for every chunk, those rows too, by all threads alike (it may
  // shuffle within a warp when kTotalChunks is a multiple of the threads),
  // so it must not dereference anything for them. `fallback` is a readable
  // address for the zero-filled chunks.
  template <class T, class RowStart>
  __device__ __forceinline__ static void LoadRowsAsync(uint32_t smem_tile, RowStart&& row_start,
                                                       int tid, int valid_rows,
                                                       const T* fallback) {
    ForEachRowChunk(tid, [&](int row, uint32_t offset, int chunk) {
      const T* start = row_start(row);
      const bool valid = row < valid_rows && start != nullptr;
      CpAsync16ZeroFill(smem_tile + offset, valid ? start + chunk * kChunkElems : fallback, valid);
    });
  }

  // Store for rows anywhere (as LoadRowsAsync): the first `valid_rows` rows.
  template <bool kNoAllocate, class T, class RowStart>
  __device__ __forceinline__ static void StoreRows(RowStart&& row_start, uint32_t smem_tile,
                                                   int tid, int valid_rows) {
    ForEachRowChunk(tid, [&](int row, uint32_t offset, int chunk) {
      if (row < valid_rows) {
        T* dst = row_start(row) + chunk * kChunkElems;
        if constexpr (kNoAllocate) {
          StGlobal128NoAllocate(dst, LdShared128(smem_tile + offset));
        } else {
          StGlobal128(dst, LdShared128(smem_tile + offset));
        }
      }
    });
  }

  // Issues cp.async for the whole tile (the caller commits and waits).
  // `gmem` points at the tile's first element; rows are `row_stride` apart.
  template <bool kPredicated, class T>
  __device__ __forceinline__ static void LoadAsync(uint32_t smem_tile, const T* gmem,
                                                   int64_t row_stride, int tid,
                                                   int valid_rows = kRows) {
    ForEachChunk(tid, gmem, row_stride, [&](int row, uint32_t offset, const T* src) {
      if constexpr (kPredicated) {
        // Rows past the end read nothing; point them at the tile's start.
        const bool valid = row < valid_rows;
        CpAsync16ZeroFill(smem_tile + offset, valid ? src : gmem, valid);
      } else {
        CpAsync16(smem_tile + offset, src);
      }
    });
  }

  // Copies the tile's first `valid_rows` rows back to global memory with
  // 16-byte stores. The caller synchronises the CTA between the
  // shared-memory writes and this call.
  template <bool kPredicated, bool kNoAllocate, class T>
  __device__ __forceinline__ static void Store(T* gmem, int64_t row_stride, uint32_t smem_tile,
                                               int tid, int valid_rows = kRows) {
    ForEachChunk(tid, gmem, row_stride, [&](int row, uint32_t offset, T* dst) {
      if (!kPredicated || row < valid_rows) {
        if constexpr (kNoAllocate) {
          StGlobal128NoAllocate(dst, LdShared128(smem_tile + offset));
        } else {
          StGlobal128(dst, LdShared128(smem_tile + offset));
        }
      }
    });
  }
};

}  // namespace attn::fa2

#endif  // ATTN_KERNELS_SRC_CUDA_DEVICE_GMEM_COPY_CUH_
