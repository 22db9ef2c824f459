// The FlashAttention-2 forward kernel, one template for every ladder step.
//
// Grid (seq_len / kBlockM, num_heads, batch); one CTA computes kBlockM query
// rows of one (batch, head), each warp kBlockM / kNumWarps of them (whole m16
// tiles). Query blocks of a head are adjacent in the grid, so CTAs resident
// together stream the same K/V blocks through L2.
//
// Shared memory: Q [kBlockM x 128], K and V [kBlockN x 128] each, one buffer
// per tensor; O is staged through Q's buffer at the end.
#ifndef ATTN_KERNELS_SRC_CUDA_FLASH_FWD_KERNEL_CUH_
#define ATTN_KERNELS_SRC_CUDA_FLASH_FWD_KERNEL_CUH_

#include <cstdint>

#include "device/gmem_copy.cuh"
#include "device/online_softmax.cuh"
#include "device/ptx.cuh"
#include "device/smem_tile.cuh"
#include "device/warp_operands.cuh"
#include "fwd_params.h"

namespace attn::fa2 {

template <class Cfg>
struct KernelShape {
  static constexpr int kThreads = Cfg::kNumWarps * 32;
  static constexpr int kWarpRows = Cfg::kBlockM / Cfg::kNumWarps;
  static constexpr int kMTiles = kWarpRows / 16;     // m16 tiles per warp
  static constexpr int kNTiles = Cfg::kBlockN / 8;   // n8 tiles of S per warp
  static constexpr int kDTiles = kHeadDim / 8;       // n8 tiles of O per warp
  static constexpr int kQKSlices = kHeadDim / 16;    // k16 slices of Q·Kᵀ
  static constexpr int kPVSlices = Cfg::kBlockN / 16;  // k16 slices of P·V
  static constexpr int kSmemBytes = (Cfg::kBlockM + 2 * Cfg::kBlockN) * kRowBytes;

  static_assert(Cfg::kBlockM % (16 * Cfg::kNumWarps) == 0, "each warp owns whole m16 tiles");
  static_assert(Cfg::kBlockN % 16 == 0, "B_c must be a multiple of 16");
  static_assert(Cfg::kQInRegisters || Cfg::kKSliced,
                "Q re-read from shared memory is loaded slice by slice with K");
};

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

template <class Cfg, class T>
__global__ void __launch_bounds__(KernelShape<Cfg>::kThreads, Cfg::kMinBlocksPerSm)
    FlashFwdKernel(const __grid_constant__ FwdParams p) {
  using Shape = KernelShape<Cfg>;
  using QCopy = TileCopy<Cfg::kBlockM, Shape::kThreads, Cfg::kSwizzle>;
  using KVCopy = TileCopy<Cfg::kBlockN, Shape::kThreads, Cfg::kSwizzle>;
  constexpr int kMTiles = Shape::kMTiles;
  constexpr int kNTiles = Shape::kNTiles;
  constexpr int kDTiles = Shape::kDTiles;
  constexpr int kQKSlices = Shape::kQKSlices;
  constexpr int kPVSlices = Shape::kPVSlices;

  extern __shared__ __align__(128) unsigned char smem[];
  const uint32_t sQ = SmemAddress(smem);
  const uint32_t sK = sQ + Cfg::kBlockM * kRowBytes;
  const uint32_t sV = sK + Cfg::kBlockN * kRowBytes;

  const int tid = threadIdx.x;
  const int lane = tid % 32;
  const int warp_row0 = (tid / 32) * Shape::kWarpRows;
  const WarpOperands<Cfg::kSwizzle> operands(lane);
  const int64_t head_offset =
      static_cast<int64_t>(blockIdx.z) * p.batch_stride + blockIdx.y * p.head_stride;
  const int64_t q_offset =
      head_offset + static_cast<int64_t>(blockIdx.x) * Cfg::kBlockM * p.row_stride;
  const T* gQ = static_cast<const T*>(p.q) + q_offset;
  const T* gK = static_cast<const T*>(p.k) + head_offset;
  const T* gV = static_cast<const T*>(p.v) + head_offset;
  T* gO = static_cast<T*>(p.o) + q_offset;
  const int64_t kv_block_stride = Cfg::kBlockN * p.row_stride;
  const int n_blocks = p.seq_len / Cfg::kBlockN;

  float acc_o[kMTiles][kDTiles][4];
  ClearAccumulators(acc_o);
  OnlineSoftmax<kMTiles, kNTiles, kDTiles, Cfg::kExp2Softmax> softmax;
  softmax.Init();

  // Prologue: Q (and with eager loads, K(0)) in flight.
  QCopy::LoadAsync(sQ, gQ, p.row_stride, tid);
  CpAsyncCommit();
  if constexpr (Cfg::kEagerKV) {
    KVCopy::LoadAsync(sK, gK, p.row_stride, tid);
    CpAsyncCommit();
  }
  constexpr int kQRegMTiles = Cfg::kQInRegisters ? kMTiles : 1;
  constexpr int kQRegSlices = Cfg::kQInRegisters ? kQKSlices : 1;
  uint32_t q_regs[kQRegMTiles][kQRegSlices][4];
  if constexpr (Cfg::kQInRegisters) {
    CpAsyncWait<Cfg::kEagerKV ? 1 : 0>();  // Q has landed (K(0) may still fly)
    __syncthreads();                       // ... for every thread's part of it
#pragma unroll
    for (int mt = 0; mt < kMTiles; ++mt)
#pragma unroll
      for (int ks = 0; ks < kQKSlices; ++ks)
        operands.LoadA(q_regs[mt][ks], sQ, warp_row0 + 16 * mt, ks);
  }

  struct QKFragments {
    uint32_t a[Cfg::kQInRegisters ? 1 : kMTiles][4];
    uint32_t b[kNTiles / 2][4];
  };
  // Q's A fragments of (m-tile, slice): resident registers or this slice's load.
  auto QOperand = [&](int mt, int ks, const QKFragments& f) -> const uint32_t(&)[4] {
    if constexpr (Cfg::kQInRegisters) {
      return q_regs[mt][ks];
    } else {
      return f.a[mt];
    }
  };
  struct PVFragments {
    uint32_t b[kDTiles / 2][4];
  };

  for (int j = 0; j < n_blocks; ++j) {
    if constexpr (Cfg::kEagerKV) {
      CpAsyncWait<0>();  // K(j) has landed
      __syncthreads();   // ... everywhere; and every warp is done with V(j-1)
      KVCopy::LoadAsync(sV, gV + j * kv_block_stride, p.row_stride, tid);
      CpAsyncCommit();
    } else {
      KVCopy::LoadAsync(sK, gK + j * kv_block_stride, p.row_stride, tid);
      CpAsyncCommit();
      CpAsyncWait<0>();  // K(j) (and in block 0, Q) has landed
      __syncthreads();
    }

    // S = Q · K(j)ᵀ
    float acc_s[kMTiles][kNTiles][4];
    ClearAccumulators(acc_s);
    RunSlices<kQKSlices, Cfg::kKSliced, Cfg::kRfDoubleBuffer, QKFragments>(
        [&](int ks, QKFragments& f) {
          if constexpr (!Cfg::kQInRegisters) {
#pragma unroll
            for (int mt = 0; mt < kMTiles; ++mt)
              operands.LoadA(f.a[mt], sQ, warp_row0 + 16 * mt, ks);
          }
#pragma unroll
          for (int np = 0; np < kNTiles / 2; ++np)
            operands.LoadBFromRows(f.b[np], sK, 16 * np, ks);
        },
        [&](int ks, const QKFragments& f) {
#pragma unroll
          for (int mt = 0; mt < kMTiles; ++mt) {
            const uint32_t(&a)[4] = QOperand(mt, ks, f);
#pragma unroll
            for (int np = 0; np < kNTiles / 2; ++np) {
              Mma16816<T>(acc_s[mt][2 * np], a, f.b[np][0], f.b[np][1]);
              Mma16816<T>(acc_s[mt][2 * np + 1], a, f.b[np][2], f.b[np][3]);
            }
          }
        });

    if constexpr (Cfg::kEagerKV) {
      CpAsyncWait<0>();  // V(j) has landed
      __syncthreads();   // ... everywhere; and every warp is done with K(j)
      if (j + 1 < n_blocks) KVCopy::LoadAsync(sK, gK + (j + 1) * kv_block_stride, p.row_stride, tid);
      CpAsyncCommit();
    }

    softmax.Update(acc_s, acc_o, p.scale, p.scale_log2);

    if constexpr (!Cfg::kEagerKV) {
      KVCopy::LoadAsync(sV, gV + j * kv_block_stride, p.row_stride, tid);
      CpAsyncCommit();
      CpAsyncWait<0>();  // V(j) has landed
      __syncthreads();   // ... everywhere (every warp is also done with K(j))
    }

    // O += P · V(j), P converted to 16-bit in registers as the A operand.
    uint32_t p_regs[kMTiles][kPVSlices][4];
#pragma unroll
    for (int mt = 0; mt < kMTiles; ++mt) {
#pragma unroll
      for (int ks = 0; ks < kPVSlices; ++ks) {
        p_regs[mt][ks][0] = PackFloat2<T>(acc_s[mt][2 * ks][0], acc_s[mt][2 * ks][1]);
        p_regs[mt][ks][1] = PackFloat2<T>(acc_s[mt][2 * ks][2], acc_s[mt][2 * ks][3]);
        p_regs[mt][ks][2] = PackFloat2<T>(acc_s[mt][2 * ks + 1][0], acc_s[mt][2 * ks + 1][1]);
        p_regs[mt][ks][3] = PackFloat2<T>(acc_s[mt][2 * ks + 1][2], acc_s[mt][2 * ks + 1][3]);
      }
    }
    RunSlices<kPVSlices, Cfg::kVSliced, Cfg::kRfDoubleBuffer, PVFragments>(
        [&](int ks, PVFragments& f) {
#pragma unroll
          for (int dp = 0; dp < kDTiles / 2; ++dp)
            operands.LoadBFromColumns(f.b[dp], sV, ks, dp);
        },
        [&](int ks, const PVFragments& f) {
#pragma unroll
          for (int mt = 0; mt < kMTiles; ++mt) {
#pragma unroll
            for (int dp = 0; dp < kDTiles / 2; ++dp) {
              Mma16816<T>(acc_o[mt][2 * dp], p_regs[mt][ks], f.b[dp][0], f.b[dp][1]);
              Mma16816<T>(acc_o[mt][2 * dp + 1], p_regs[mt][ks], f.b[dp][2], f.b[dp][3]);
            }
          }
        });
  }

  // Epilogue: normalise, stage O through Q's buffer, store 16 B per thread.
  softmax.Normalize(acc_o);
  __syncthreads();  // every warp is done reading Q, K and V
  const int group = lane / 4;
  const int tig = lane % 4;
#pragma unroll
  for (int mt = 0; mt < kMTiles; ++mt) {
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      const int row = warp_row0 + 16 * mt + group + 8 * h;
#pragma unroll
      for (int dt = 0; dt < kDTiles; ++dt) {
        StShared32(sQ + SmemTile<Cfg::kSwizzle>::ChunkOffset(row, dt) + 4 * tig,
                   PackFloat2<T>(acc_o[mt][dt][2 * h], acc_o[mt][dt][2 * h + 1]));
      }
    }
  }
  __syncthreads();  // O is complete in shared memory
  QCopy::Store(gO, p.row_stride, sQ, tid);
}

}  // namespace attn::fa2

#endif  // ATTN_KERNELS_SRC_CUDA_FLASH_FWD_KERNEL_CUH_
