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
//   kSplit   split-KV: blockIdx.x is (query block, split); each CTA attends
//            its split's share of the key blocks and writes a normalised
//            float32 partial O and its LSE to the workspace
//            (FwdParams::o_accum, lse_accum) for the combine kernel.
// The ladder steps are all <kEven = true, kMasked = false, kSplit = false>.
//
// With Cfg::kPackGqa the grid's y is the KV head and a tile's rows are the
// (query row, query head) pairs of its group (kernel_config.h); these decode
// configurations also read K/V caches, dense or paged (FwdParams).
//
// Shared memory: Q [kBlockM x pitch], K and V [kBlockN x pitch] each, one
// buffer per tensor; O is staged through Q's buffer at the end.
#ifndef ATTN_KERNELS_SRC_CUDA_FLASH_FWD_KERNEL_CUH_
#define ATTN_KERNELS_SRC_CUDA_FLASH_FWD_KERNEL_CUH_

#include <cstdint>
#include <type_traits>

#include "device/accumulators.cuh"
#include "device/attention_mask.cuh"
#include "device/gmem_copy.cuh"
#include "device/online_softmax.cuh"
#include "device/ptx.cuh"
#include "device/smem_tile.cuh"
#include "device/warp_operands.cuh"
#include "fwd_params.h"
#include "sequence_span.cuh"

namespace attn::fa2 {

template <class Cfg>
struct KernelShape {
  using QTile = SmemTile<Cfg::kHeadDim, Cfg::kBlockM, Cfg::kSwizzle, Cfg::kColumnTiles>;
  using KVTile = SmemTile<Cfg::kHeadDim, Cfg::kBlockN, Cfg::kSwizzle, Cfg::kColumnTiles>;
  static constexpr int kThreads = Cfg::kNumWarps * 32;
  static constexpr int kWarpRows = Cfg::kBlockM / Cfg::kNumWarps;
  static constexpr int kMTiles = kWarpRows / 16;          // m16 tiles per warp
  static constexpr int kNTiles = Cfg::kBlockN / 8;        // n8 tiles of S per warp
  static constexpr int kDTiles = Cfg::kHeadDim / 8;       // n8 tiles of O per warp
  static constexpr int kQKSlices = Cfg::kHeadDim / 16;    // k16 slices of Q·Kᵀ
  static constexpr int kPVSlices = Cfg::kBlockN / 16;     // k16 slices of P·V
  static constexpr int kSmemBytes = QTile::kBytes + 2 * KVTile::kBytes;

  static_assert(Cfg::kBlockM % (16 * Cfg::kNumWarps) == 0, "each warp owns whole m16 tiles");
  static_assert(Cfg::kBlockN % 16 == 0, "B_c must be a multiple of 16");
  static_assert(kDTiles % 2 == 0, "O is loaded in pairs of n8 tiles (head_dim % 16 == 0)");
  static_assert(Cfg::kQInRegisters || Cfg::kKSliced,
                "Q re-read from shared memory is loaded slice by slice with K");
};

template <class Cfg, class T, bool kEven, bool kMasked, bool kSplit = false>
__global__ void __launch_bounds__(KernelShape<Cfg>::kThreads, Cfg::kMinBlocksPerSm)
    FlashFwdKernel(const __grid_constant__ FwdParams p) {
  using Shape = KernelShape<Cfg>;
  using QTile = typename Shape::QTile;
  using KVTile = typename Shape::KVTile;
  using QCopy = TileCopy<Cfg::kBlockM, Shape::kThreads, QTile>;
  using KVCopy = TileCopy<Cfg::kBlockN, Shape::kThreads, KVTile>;
  constexpr int kMTiles = Shape::kMTiles;
  constexpr int kNTiles = Shape::kNTiles;
  constexpr int kDTiles = Shape::kDTiles;
  constexpr int kQKSlices = Shape::kQKSlices;
  constexpr int kPVSlices = Shape::kPVSlices;
  constexpr bool kPredicated = !kEven;
  constexpr bool kPacked = Cfg::kPackGqa;
  // Rows may see no key in a block (or, split, in a whole split).
  constexpr bool kMaskAware = kMasked || !kEven || kSplit;
  // A tile may hold fewer rows than kBlockM.
  constexpr bool kRaggedRows = !kEven || kPacked;
  // Step 16: row strides as immediates (the host launches this variant only
  // when every row stride equals kStaticRowStride).
  constexpr int64_t kStatic = Cfg::kStaticRowStride;
  const int64_t q_row_stride = kStatic ? kStatic : p.q_row_stride;
  const int64_t kv_row_stride = kStatic ? kStatic : p.kv_row_stride;
  const int64_t o_row_stride = kStatic ? kStatic : p.o_row_stride;

  // Split: the combine may start launching now (it waits for this grid).
  if constexpr (kSplit) GridLaunchDependents();
  // Masked grids run their query blocks last-first: under a causal mask the
  // last blocks see the most keys, and starting them first shortens the tail.
  const int num_splits = kSplit ? p.num_splits : 1;
  const int m_blocks = kSplit ? gridDim.x / num_splits : gridDim.x;
  const int m_in_grid = kSplit ? blockIdx.x / num_splits : blockIdx.x;
  const int split = kSplit ? blockIdx.x % num_splits : 0;
  const int m_block = kMasked ? m_blocks - 1 - m_in_grid : m_in_grid;
  const int head = blockIdx.y;  // packed: the KV head
  const int b = blockIdx.z;
  const SequenceSpan seq = SequenceSpan::Of<kPacked>(p, b);
  const int pack = kPacked ? p.heads_per_kv : 1;  // query heads per tile row group
  const int tile_rows = seq.seqlen_q * pack;      // rows of this (sequence, head or group)
  if (kRaggedRows && m_block * Cfg::kBlockM >= tile_rows) return;  // past this sequence
  const int q_rows = kRaggedRows ? min(Cfg::kBlockM, tile_rows - m_block * Cfg::kBlockM)
                                 : Cfg::kBlockM;

  const BlockMask<Cfg::kBlockM, Cfg::kBlockN, kPacked> mask{
      seq.seqlen_k, seq.seqlen_k - seq.seqlen_q, p.window_left, p.window_right, pack};
  int n_begin = 0;
  int n_end = (seq.seqlen_k + Cfg::kBlockN - 1) / Cfg::kBlockN;
  if constexpr (kMasked) mask.KeyBlocks(m_block, &n_begin, &n_end);
  if constexpr (kSplit) {
    // This split's share of the visible key blocks (none when they run out).
    const int per_split = (n_end - n_begin + num_splits - 1) / num_splits;
    n_begin += split * per_split;
    n_end = min(n_end, n_begin + per_split);
  }
  const int n_count = max(n_end - n_begin, 0);
  // The i-th key block visited: forwards, or from the last (step 13).
  auto block_at = [&](int i) { return Cfg::kBackwardKV ? n_end - 1 - i : n_begin + i; };

  extern __shared__ __align__(128) unsigned char smem[];
  const uint32_t sQ = SmemAddress(smem);
  const uint32_t sK = sQ + QTile::kBytes;
  const uint32_t sV = sK + KVTile::kBytes;

  const int tid = threadIdx.x;
  const int lane = tid % 32;
  const int warp_row0 = (tid / 32) * Shape::kWarpRows;
  const WarpOperands<QTile, KVTile, Cfg::kSignedStrideSwizzle> operands(lane);
  const int kv_head = kPacked ? head : head / p.heads_per_kv;
  const int64_t q_row0 = static_cast<int64_t>(m_block) * Cfg::kBlockM;
  // Packed tiles: where tile row r of Q (and of O) starts.
  auto packed_row = [&](int r, int64_t row_stride, int64_t head_stride) {
    const int g = static_cast<int>(q_row0) + r;
    return (g / pack) * row_stride + (head * pack + g % pack) * head_stride;
  };
  auto q_row_start = [&](int r) {
    return static_cast<const T*>(p.q) + seq.q_offset + packed_row(r, q_row_stride, p.q_head_stride);
  };
  auto o_row_start = [&](int r) {
    return static_cast<T*>(p.o) + seq.o_offset + packed_row(r, o_row_stride, p.o_head_stride);
  };
  // The LSE's index of tile row r ([batch, heads_q, seqlen_q], varlen
  // [heads_q, total_q]); also the row of the split workspace.
  auto lse_index = [&](int r) -> int64_t {
    const int g = static_cast<int>(q_row0) + r;
    const int q = kPacked ? g / pack : g;
    const int h = kPacked ? head * pack + g % pack : head;
    return p.cu_seqlens_q != nullptr
               ? static_cast<int64_t>(h) * p.total_q + seq.q_start + q
               : (static_cast<int64_t>(b) * p.heads_q + h) * p.seqlen_q + q;
  };
  const T* gQ = static_cast<const T*>(p.q) + seq.q_offset + head * p.q_head_stride +
                q_row0 * q_row_stride;
  T* gO = static_cast<T*>(p.o) + seq.o_offset + head * p.o_head_stride + q_row0 * o_row_stride;
  const T* gK = static_cast<const T*>(p.k) + seq.k_offset + kv_head * p.k_head_stride;
  const T* gV = static_cast<const T*>(p.v) + seq.v_offset + kv_head * p.v_head_stride;
  const int64_t kv_block_stride = Cfg::kBlockN * kv_row_stride;
  // Rows of key block j that exist (the last block of a ragged sequence is short).
  auto key_rows = [&](int j) { return seq.seqlen_k - j * Cfg::kBlockN; };
  // A paged K/V cache's pages of this sequence (decode configurations only).
  const int32_t* pages =
      kPacked && p.block_table != nullptr ? p.block_table + b * p.block_table_stride : nullptr;
  // Pages smaller than a key block: the table is read 32 entries at a time,
  // lane l holding entry 32w + l of window w, and dealt to the rows by
  // shuffles (a table lookup per block in the copy's path costs as much as
  // the copy itself at page 16). Two windows are held: the one of the block
  // V reads (`ids_here`, window `page_window`) and the next one in visiting
  // order (`ids_next`), which K, one block ahead, may already be in; V's
  // stepping into it moves both, and the load of the new next window has
  // 32 pages of blocks to land before anyone waits on it.
  constexpr int kVisitStep = Cfg::kBackwardKV ? -1 : 1;
  int page_window = -(1 << 29);  // none read yet
  int ids_here = -1, ids_next = -1;
  auto table_window = [&](int w) {  // this lane's entry of window w; -1 outside the table
    const int e = w * 32 + (threadIdx.x & 31);
    return e >= 0 && e < p.block_table_stride ? pages[e] : -1;
  };
  // This lane's entry of the window holding table entry `first`; `lagging`:
  // the access of V, which may move the windows forward.
  auto page_ids = [&](int first, bool lagging) -> int {
    const int w = first >> 5;
    if (lagging && w == page_window + kVisitStep) {
      page_window = w;
      ids_here = ids_next;
      ids_next = table_window(w + kVisitStep);
    }
    if (w == page_window) return ids_here;
    if (w == page_window + kVisitStep) return ids_next;
    page_window = w;  // the first block (or any other jump): read both now
    ids_here = table_window(w);
    ids_next = table_window(w + kVisitStep);
    return ids_here;
  };
  // Key block j of K or V (`g` at its head's first element; pages
  // `page_stride` apart when paged) into `tile`; `lagging`: V's read.
  auto load_kv = [&](uint32_t tile, const T* g, int64_t page_stride, int j, bool lagging) {
    if constexpr (kPacked) {
      if (pages != nullptr) {
        const int t0 = j * Cfg::kBlockN;
        const int in_page = (1 << p.page_shift) - 1;
        // Row t of page `page`; null (read as zeros) for a page out of range.
        auto row_of = [&](int page, int t) -> const T* {
          return static_cast<unsigned>(page) < static_cast<unsigned>(p.num_pages)
                     ? g + page * page_stride + (t & in_page) * kv_row_stride
                     : nullptr;
        };
        static_assert(Cfg::kBlockN <= 32 && Shape::kThreads % 32 == 0 &&
                          KVCopy::kTotalChunks % Shape::kThreads == 0,
                      "paged blocks: a block's pages fit a warp, every lane copies as often");
        // A block's pages are aligned in the table (their count divides 32),
        // so they sit in one window.
        const int first = t0 >> p.page_shift;
        const int ids = page_ids(first, lagging);
        auto page_at = [&](int r) {  // the page of the block's row r, from its lane
          return __shfl_sync(0xffffffffu, ids, (first & 31) + (r >> p.page_shift));
        };
        if (((Cfg::kBlockN - 1) >> p.page_shift) == 0) {  // kBlockN <= page: one page
          const T* start = row_of(page_at(0), t0);
          KVCopy::template LoadAsync<true>(tile, start != nullptr ? start : g, kv_row_stride, tid,
                                           start != nullptr ? key_rows(j) : 0);
        } else {
          KVCopy::template LoadRowsAsync<T>(
              tile, [&](int r) { return row_of(page_at(r), t0 + r); }, tid, key_rows(j), g);
        }
        return;
      }
    }
    KVCopy::template LoadAsync<kPredicated>(tile, g + j * kv_block_stride, kv_row_stride, tid,
                                            key_rows(j));
  };
  auto load_k = [&](int j) { load_kv(sK, gK, p.k_batch_stride, j, false); };
  auto load_v = [&](int j) { load_kv(sV, gV, p.v_batch_stride, j, true); };

  float acc_o[kMTiles][kDTiles][4];
  // Step 10 zeroes O right before the first block's P·V instead (and here
  // only when no block is visited).
  if (!Cfg::kPeelFirstBlock || n_count == 0) ClearAccumulators(acc_o);
  OnlineSoftmax<kMTiles, kNTiles, kDTiles, Cfg::kExp2Softmax, kMaskAware> softmax;
  softmax.Init();

  // Prologue: Q (and with eager loads, the first key block) in flight.
  if constexpr (kPacked) {
    QCopy::template LoadRowsAsync<T>(sQ, q_row_start, tid, q_rows, static_cast<const T*>(p.q));
  } else {
    QCopy::template LoadAsync<kPredicated>(sQ, gQ, q_row_stride, tid, q_rows);
  }
  CpAsyncCommit();
  if constexpr (Cfg::kEagerKV) {
    if (n_count > 0) load_k(block_at(0));
    CpAsyncCommit();
  }
  constexpr int kQRegMTiles = Cfg::kQInRegisters ? kMTiles : 1;
  constexpr int kQRegSlices = Cfg::kQInRegisters ? kQKSlices : 1;
  uint32_t q_regs[kQRegMTiles][kQRegSlices][4];
  if constexpr (Cfg::kQInRegisters) {
    CpAsyncWait<Cfg::kEagerKV ? 1 : 0>();  // Q has landed (K may still fly)
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
  // The m-tile visited at position `i` of an inner loop over m-tiles, inside
  // outer position `o`: in order, or serpentine (reversed on odd o, step 9).
  auto m_order = [](int o, int i) { return (Cfg::kSerpentineMma && (o & 1)) ? kMTiles - 1 - i : i; };

  // One key block: S = Q·K(j)ᵀ, mask, online softmax, O += P·V(j). kFirst:
  // the first block visited (peeled with step 10).
  auto process_block = [&](auto first_tag, int i) {
    constexpr bool kFirst = decltype(first_tag)::value;
    const int j = block_at(i);
    const bool has_next = i + 1 < n_count;
    if constexpr (Cfg::kEagerKV) {
      CpAsyncWait<0>();  // K(j) has landed
      __syncthreads();   // ... everywhere; and every warp is done with the last V
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
          if constexpr (Cfg::kSerpentineMma) {
#pragma unroll
            for (int np = 0; np < kNTiles / 2; ++np) {
#pragma unroll
              for (int x = 0; x < kMTiles; ++x) {
                const int mt = m_order(np, x);
                const uint32_t(&a)[4] = QOperand(mt, ks, f);
                Mma16816<T>(acc_s[mt][2 * np], a, f.b[np][0], f.b[np][1]);
                Mma16816<T>(acc_s[mt][2 * np + 1], a, f.b[np][2], f.b[np][3]);
              }
            }
          } else {
#pragma unroll
            for (int mt = 0; mt < kMTiles; ++mt) {
              const uint32_t(&a)[4] = QOperand(mt, ks, f);
#pragma unroll
              for (int np = 0; np < kNTiles / 2; ++np) {
                Mma16816<T>(acc_s[mt][2 * np], a, f.b[np][0], f.b[np][1]);
                Mma16816<T>(acc_s[mt][2 * np + 1], a, f.b[np][2], f.b[np][3]);
              }
            }
          }
        });

    if constexpr (Cfg::kEagerKV) {
      CpAsyncWait<0>();  // V(j) has landed
      __syncthreads();   // ... everywhere; and every warp is done with K(j)
      if (has_next) load_k(block_at(i + 1));
      CpAsyncCommit();
    }

    if constexpr (kMaskAware) {
      if (mask.template NeedsMask<!kEven>(m_block, j)) {
        mask.Apply(acc_s, static_cast<int>(q_row0) + warp_row0, j * Cfg::kBlockN, lane);
        softmax.template Update<true, kFirst>(acc_s, acc_o, p.scale, p.scale_log2);
      } else {
        softmax.template Update<false, kFirst>(acc_s, acc_o, p.scale, p.scale_log2);
      }
    } else {
      softmax.template Update<false, kFirst>(acc_s, acc_o, p.scale, p.scale_log2);
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
    if constexpr (kFirst && Cfg::kPeelFirstBlock) ClearAccumulators(acc_o);
    RunSlices<kPVSlices, Cfg::kVSliced, Cfg::kRfDoubleBuffer, PVFragments>(
        [&](int ks, PVFragments& f) {
#pragma unroll
          for (int dp = 0; dp < kDTiles / 2; ++dp)
            operands.LoadBFromColumns(f.b[dp], sV, ks, dp);
        },
        [&](int ks, const PVFragments& f) {
          if constexpr (Cfg::kSerpentineMma) {
#pragma unroll
            for (int dp = 0; dp < kDTiles / 2; ++dp) {
#pragma unroll
              for (int x = 0; x < kMTiles; ++x) {
                const int mt = m_order(dp, x);
                Mma16816<T>(acc_o[mt][2 * dp], p_regs[mt][ks], f.b[dp][0], f.b[dp][1]);
                Mma16816<T>(acc_o[mt][2 * dp + 1], p_regs[mt][ks], f.b[dp][2], f.b[dp][3]);
              }
            }
          } else {
#pragma unroll
            for (int mt = 0; mt < kMTiles; ++mt) {
#pragma unroll
              for (int dp = 0; dp < kDTiles / 2; ++dp) {
                Mma16816<T>(acc_o[mt][2 * dp], p_regs[mt][ks], f.b[dp][0], f.b[dp][1]);
                Mma16816<T>(acc_o[mt][2 * dp + 1], p_regs[mt][ks], f.b[dp][2], f.b[dp][3]);
              }
            }
          }
        });
  };

  int i = 0;
  if constexpr (Cfg::kPeelFirstBlock) {
    if (n_count > 0) process_block(std::true_type{}, i++);
  }
  for (; i < n_count; ++i) process_block(std::false_type{}, i);

  // Epilogue: normalise, stage O through Q's buffer, store 16 B per thread.
  softmax.Normalize(acc_o);
  const int group = lane / 4;
  const int tig = lane % 4;
  if constexpr (kSplit) {
    // The split's partial O and LSE, float32, straight from registers.
#pragma unroll
    for (int mt = 0; mt < kMTiles; ++mt) {
#pragma unroll
      for (int h = 0; h < 2; ++h) {
        const int row = warp_row0 + 16 * mt + group + 8 * h;
        if (row >= q_rows) continue;
        const int64_t at = static_cast<int64_t>(split) * p.lse_rows + lse_index(row);
        float* o_part = p.o_accum + at * Cfg::kHeadDim + 2 * tig;
#pragma unroll
        for (int dt = 0; dt < kDTiles; ++dt) {
          *reinterpret_cast<float2*>(o_part + 8 * dt) =
              make_float2(acc_o[mt][dt][2 * h], acc_o[mt][dt][2 * h + 1]);
        }
        if (tig == 0) p.lse_accum[at] = softmax.Lse(mt, h, p.scale_log2);
      }
    }
    CpAsyncWait<0>();  // nothing may land in shared memory after the CTA ends
    return;
  }
  CpAsyncWait<0>();  // nothing may still land in shared memory (Q, with no key block)
  __syncthreads();   // every warp is done reading Q, K and V
  // This thread's rows are warp_row0 + group + 8k: all share the swizzle
  // pattern of `group`, so a store's offset is a per-thread base plus the
  // row step plus the chunk's place in its group. Step 11 precomputes the
  // eight places once; before it each store XORs.
  const uint32_t o_base = sQ + static_cast<uint32_t>((warp_row0 + group) * QTile::kRowPitch + 4 * tig);
  uint32_t o_place[Cfg::kEncodedEpilogue ? 8 : 1];
  if constexpr (Cfg::kEncodedEpilogue) {
#pragma unroll
    for (int r = 0; r < 8; ++r) o_place[r] = QTile::InGroup(group, r) * kChunkBytes;
  }
  auto chunk_place = [&](int dt) -> uint32_t {
    if constexpr (Cfg::kEncodedEpilogue) {
      return o_place[dt & 7];
    } else {
      return static_cast<uint32_t>(QTile::InGroup(group, dt) * kChunkBytes);
    }
  };
#pragma unroll
  for (int mt = 0; mt < kMTiles; ++mt) {
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      const uint32_t row_offset = static_cast<uint32_t>((16 * mt + 8 * h) * QTile::kRowPitch);
#pragma unroll
      for (int dt = 0; dt < kDTiles; ++dt) {
        StShared32(o_base + row_offset + QTile::GroupOffset(dt) + chunk_place(dt),
                   PackFloat2<T>(acc_o[mt][dt][2 * h], acc_o[mt][dt][2 * h + 1]));
      }
    }
  }
  if (p.lse != nullptr && tig == 0) {
    // LSE: [batch, heads_q, seqlen_q], or [heads_q, total_q] with varlen
    // (one head per CTA unless packed: then lse_index's per-row head).
    float* lse = p.cu_seqlens_q != nullptr
                     ? p.lse + static_cast<int64_t>(head) * p.total_q + seq.q_start
                     : p.lse + (static_cast<int64_t>(b) * p.heads_q + head) * p.seqlen_q;
#pragma unroll
    for (int mt = 0; mt < kMTiles; ++mt) {
#pragma unroll
      for (int h = 0; h < 2; ++h) {
        const int row = warp_row0 + 16 * mt + group + 8 * h;
        if (row >= q_rows) continue;
        if constexpr (kPacked) {
          p.lse[lse_index(row)] = softmax.Lse(mt, h, p.scale_log2);
        } else {
          lse[q_row0 + row] = softmax.Lse(mt, h, p.scale_log2);
        }
      }
    }
  }
  __syncthreads();  // O is complete in shared memory
  if constexpr (kPacked) {
    QCopy::template StoreRows<Cfg::kNoAllocateStores, T>(o_row_start, sQ, tid, q_rows);
  } else {
    QCopy::template Store<kPredicated, Cfg::kNoAllocateStores>(gO, o_row_stride, sQ, tid, q_rows);
  }
}

}  // namespace attn::fa2

#endif  // ATTN_KERNELS_SRC_CUDA_FLASH_FWD_KERNEL_CUH_
