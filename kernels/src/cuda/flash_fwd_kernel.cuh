// The FlashAttention-2 forward kernel, one template for every ladder step and
// for the production kernel.
//
// Grid (query blocks, heads_q, batch); one CTA computes kBlockM query rows of
// one (sequence, query head) against the key/value head it reads (grouped-
// query attention: kv head = head / heads_per_kv), each warp kBlockM /
// kNumWarps of them (whole m16 tiles). Query blocks of a head are adjacent in
// the grid, so CTAs resident together stream the same K/V blocks through L2.
//
// Compile-time switches chosen at launch (as FA2's Is_even_MN / Is_causal):
//   kEven    every sequence is a whole number of blocks and not varlen: no
//            predicated loads or stores, no ragged-end masks;
//   kMasked  causal or a sliding window: only the key blocks a query block
//            can see are visited, the ones crossing a window edge are masked
//            element-wise, and query blocks run heaviest first (reversed).
// The ladder steps are all <kEven = true, kMasked = false>.
//
// Shared memory: Q [kBlockM x pitch], K and V [kBlockN x pitch] each, one
// buffer per tensor; O is staged through Q's buffer at the end.
#ifndef ATTN_KERNELS_SRC_CUDA_FLASH_FWD_KERNEL_CUH_
#define ATTN_KERNELS_SRC_CUDA_FLASH_FWD_KERNEL_CUH_

#include <cstdint>

#include "device/attention_mask.cuh"
#include "device/gmem_copy.cuh"
#include "device/online_softmax.cuh"
#include "device/ptx.cuh"
#include "device/smem_tile.cuh"
#include "device/warp_operands.cuh"
#include "fwd_params.h"

namespace attn::fa2 {

template <class Cfg>
struct KernelShape {
  using Geometry = TileGeometry<Cfg::kHeadDim>;
  static constexpr int kThreads = Cfg::kNumWarps * 32;
  static constexpr int kWarpRows = Cfg::kBlockM / Cfg::kNumWarps;
  static constexpr int kMTiles = kWarpRows / 16;          // m16 tiles per warp
  static constexpr int kNTiles = Cfg::kBlockN / 8;        // n8 tiles of S per warp
  static constexpr int kDTiles = Cfg::kHeadDim / 8;       // n8 tiles of O per warp
  static constexpr int kQKSlices = Cfg::kHeadDim / 16;    // k16 slices of Q·Kᵀ
  static constexpr int kPVSlices = Cfg::kBlockN / 16;     // k16 slices of P·V
  static constexpr int kSmemBytes = (Cfg::kBlockM + 2 * Cfg::kBlockN) * Geometry::kRowBytes;

  static_assert(Cfg::kBlockM % (16 * Cfg::kNumWarps) == 0, "each warp owns whole m16 tiles");
  static_assert(Cfg::kBlockN % 16 == 0, "B_c must be a multiple of 16");
  static_assert(kDTiles % 2 == 0, "O is loaded in pairs of n8 tiles (head_dim % 16 == 0)");
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

// One CTA's sequence: where its tokens start and how many there are.
struct SequenceSpan {
  int64_t q_offset;  // elements from the tensor's start to the sequence's first token
  int64_t k_offset;
  int64_t v_offset;
  int64_t o_offset;
  int seqlen_q;
  int seqlen_k;
  int q_start;  // first packed query token (varlen LSE index), else 0

  __device__ __forceinline__ static SequenceSpan Of(const FwdParams& p, int b) {
    SequenceSpan s;
    if (p.cu_seqlens_q != nullptr) {
      const int q0 = p.cu_seqlens_q[b];
      const int k0 = p.cu_seqlens_k[b];
      s.seqlen_q = p.cu_seqlens_q[b + 1] - q0;
      s.seqlen_k = p.cu_seqlens_k[b + 1] - k0;
      s.q_start = q0;
      s.q_offset = q0 * p.q_row_stride;
      s.o_offset = q0 * p.o_row_stride;
      s.k_offset = k0 * p.kv_row_stride;
      s.v_offset = k0 * p.kv_row_stride;
    } else {
      s.seqlen_q = p.seqlen_q;
      s.seqlen_k = p.seqlen_k;
      s.q_start = 0;
      s.q_offset = b * p.q_batch_stride;
      s.o_offset = b * p.o_batch_stride;
      s.k_offset = b * p.k_batch_stride;
      s.v_offset = b * p.v_batch_stride;
    }
    return s;
  }
};

template <class Cfg, class T, bool kEven, bool kMasked>
__global__ void __launch_bounds__(KernelShape<Cfg>::kThreads, Cfg::kMinBlocksPerSm)
    FlashFwdKernel(const __grid_constant__ FwdParams p) {
  using Shape = KernelShape<Cfg>;
  using Geometry = typename Shape::Geometry;
  using QCopy = TileCopy<Cfg::kBlockM, Shape::kThreads, Cfg::kSwizzle, Cfg::kHeadDim>;
  using KVCopy = TileCopy<Cfg::kBlockN, Shape::kThreads, Cfg::kSwizzle, Cfg::kHeadDim>;
  using Tile = SmemTile<Cfg::kSwizzle, Geometry::kRowBytes>;
  constexpr int kMTiles = Shape::kMTiles;
  constexpr int kNTiles = Shape::kNTiles;
  constexpr int kDTiles = Shape::kDTiles;
  constexpr int kQKSlices = Shape::kQKSlices;
  constexpr int kPVSlices = Shape::kPVSlices;
  constexpr bool kPredicated = !kEven;
  constexpr bool kMaskAware = kMasked || !kEven;  // rows may see no key in a block

  // Masked grids run their query blocks last-first: under a causal mask the
  // last blocks see the most keys, and starting them first shortens the tail.
  const int m_block = kMasked ? gridDim.x - 1 - blockIdx.x : blockIdx.x;
  const int head = blockIdx.y;
  const int b = blockIdx.z;
  const SequenceSpan seq = SequenceSpan::Of(p, b);
  if (!kEven && m_block * Cfg::kBlockM >= seq.seqlen_q) return;  // varlen: past this sequence
  const int q_rows = kEven ? Cfg::kBlockM : min(Cfg::kBlockM, seq.seqlen_q - m_block * Cfg::kBlockM);

  const BlockMask<Cfg::kBlockM, Cfg::kBlockN> mask{seq.seqlen_k, seq.seqlen_k - seq.seqlen_q,
                                                    p.window_left, p.window_right};
  int n_begin = 0;
  int n_end = (seq.seqlen_k + Cfg::kBlockN - 1) / Cfg::kBlockN;
  if constexpr (kMasked) mask.KeyBlocks(m_block, &n_begin, &n_end);

  extern __shared__ __align__(128) unsigned char smem[];
  const uint32_t sQ = SmemAddress(smem);
  const uint32_t sK = sQ + Cfg::kBlockM * Geometry::kRowBytes;
  const uint32_t sV = sK + Cfg::kBlockN * Geometry::kRowBytes;

  const int tid = threadIdx.x;
  const int lane = tid % 32;
  const int warp_row0 = (tid / 32) * Shape::kWarpRows;
  const WarpOperands<Cfg::kSwizzle, Geometry::kRowBytes> operands(lane);
  const int kv_head = head / p.heads_per_kv;
  const int64_t q_row0 = static_cast<int64_t>(m_block) * Cfg::kBlockM;
  const T* gQ = static_cast<const T*>(p.q) + seq.q_offset + head * p.q_head_stride +
                q_row0 * p.q_row_stride;
  T* gO = static_cast<T*>(p.o) + seq.o_offset + head * p.o_head_stride + q_row0 * p.o_row_stride;
  const T* gK = static_cast<const T*>(p.k) + seq.k_offset + kv_head * p.k_head_stride;
  const T* gV = static_cast<const T*>(p.v) + seq.v_offset + kv_head * p.v_head_stride;
  const int64_t kv_block_stride = Cfg::kBlockN * p.kv_row_stride;
  // Rows of key block j that exist (the last block of a ragged sequence is short).
  auto key_rows = [&](int j) { return seq.seqlen_k - j * Cfg::kBlockN; };
  auto load_k = [&](int j) {
    KVCopy::template LoadAsync<kPredicated>(sK, gK + j * kv_block_stride, p.kv_row_stride, tid,
                                            key_rows(j));
  };
  auto load_v = [&](int j) {
    KVCopy::template LoadAsync<kPredicated>(sV, gV + j * kv_block_stride, p.kv_row_stride, tid,
                                            key_rows(j));
  };

  float acc_o[kMTiles][kDTiles][4];
  ClearAccumulators(acc_o);
  OnlineSoftmax<kMTiles, kNTiles, kDTiles, Cfg::kExp2Softmax, kMaskAware> softmax;
  softmax.Init();

  // Prologue: Q (and with eager loads, K(n_begin)) in flight.
  QCopy::template LoadAsync<kPredicated>(sQ, gQ, p.q_row_stride, tid, q_rows);
  CpAsyncCommit();
  if constexpr (Cfg::kEagerKV) {
    if (n_begin < n_end) load_k(n_begin);
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

  for (int j = n_begin; j < n_end; ++j) {
    if constexpr (Cfg::kEagerKV) {
      CpAsyncWait<0>();  // K(j) has landed
      __syncthreads();   // ... everywhere; and every warp is done with V(j-1)
      load_v(j);
      CpAsyncCommit();
    } else {
      load_k(j);
      CpAsyncCommit();
      CpAsyncWait<0>();  // K(j) (and in the first block, Q) has landed
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
      if (j + 1 < n_end) load_k(j + 1);
      CpAsyncCommit();
    }

    if constexpr (kMaskAware) {
      if (mask.template NeedsMask<!kEven>(m_block, j)) {
        mask.Apply(acc_s, static_cast<int>(q_row0) + warp_row0, j * Cfg::kBlockN, lane);
        softmax.template Update<true>(acc_s, acc_o, p.scale, p.scale_log2);
      } else {
        softmax.Update(acc_s, acc_o, p.scale, p.scale_log2);
      }
    } else {
      softmax.Update(acc_s, acc_o, p.scale, p.scale_log2);
    }

    if constexpr (!Cfg::kEagerKV) {
      load_v(j);
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
  CpAsyncWait<0>();  // nothing may still land in shared memory (Q, with no key block)
  __syncthreads();   // every warp is done reading Q, K and V
  const int group = lane / 4;
  const int tig = lane % 4;
#pragma unroll
  for (int mt = 0; mt < kMTiles; ++mt) {
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      const int row = warp_row0 + 16 * mt + group + 8 * h;
#pragma unroll
      for (int dt = 0; dt < kDTiles; ++dt) {
        StShared32(sQ + Tile::ChunkOffset(row, dt) + 4 * tig,
                   PackFloat2<T>(acc_o[mt][dt][2 * h], acc_o[mt][dt][2 * h + 1]));
      }
    }
  }
  if (p.lse != nullptr && tig == 0) {
    // LSE: [batch, heads_q, seqlen_q], or [heads_q, total_q] with varlen.
    float* lse = p.cu_seqlens_q != nullptr
                     ? p.lse + static_cast<int64_t>(head) * p.total_q + seq.q_start
                     : p.lse + (static_cast<int64_t>(b) * p.heads_q + head) * p.seqlen_q;
#pragma unroll
    for (int mt = 0; mt < kMTiles; ++mt) {
#pragma unroll
      for (int h = 0; h < 2; ++h) {
        const int row = warp_row0 + 16 * mt + group + 8 * h;
        if (row < q_rows) lse[q_row0 + row] = softmax.Lse(mt, h, p.scale_log2);
      }
    }
  }
  __syncthreads();  // O is complete in shared memory
  QCopy::template Store<kPredicated>(gO, p.o_row_stride, sQ, tid, q_rows);
}

}  // namespace attn::fa2

#endif  // ATTN_KERNELS_SRC_CUDA_FLASH_FWD_KERNEL_CUH_
