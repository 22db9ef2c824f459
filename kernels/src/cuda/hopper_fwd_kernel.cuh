// The hopper family's forward kernel (sm_90a): FlashAttention-2's algorithm
// on Hopper's asynchronous machinery, as FlashAttention-3 arranges it.
//
// Grid (query blocks, heads_q, batch), as the Ampere kernel's; one CTA of
// 1 + kConsumers warpgroups computes 64·kConsumers query rows of one
// (sequence, query head):
//   warpgroup 0, the producer: gives its registers back (setmaxnreg) and
//     one thread issues TMA copies — Q once, then K and V of each key block
//     into a ring of kStages stages, each stage waiting on its "empty"
//     mbarrier and completing on its "full" one;
//   warpgroups 1.., the consumers, 64 query rows each: S = Q·Kᵀ with
//     wgmma from shared memory, the Ampere family's mask and online
//     softmax on the accumulators (the fragment layouts are the same:
//     device/wgmma.cuh), then O += P·V with P from registers; each releases
//     a stage's K and V as soon as its MMAs have read them. Within a
//     consumer, block i's softmax runs while block i-1's P·V is in flight;
//     with kPingPong the consumers also issue their MMAs in turn, so one's
//     softmax overlaps the next one's MMAs on the tensor cores.
// Out-of-range rows of a box read as zeros (dense tensors: the maps'
// bounds are each sequence's); varlen boxes may read the next sequence's
// rows, which the masks exclude (keys) or no store writes (queries).
//
// Switches as the Ampere kernel's: kEven (whole blocks, no varlen: no key
// tail mask, no row bounds on stores), kMasked (causal or window: visible
// key blocks only, query blocks heaviest first). Key blocks are visited
// last to first, so a causal diagonal's masked block comes first.
//
// Shared memory (128-byte swizzled pages, device/wgmma.cuh): Q [kBlockM rows],
// kStages x K and V [kBlockN rows], then the mbarriers. O is staged through
// each consumer's own 64 rows of Q at the end.
#ifndef ATTN_KERNELS_SRC_CUDA_HOPPER_FWD_KERNEL_CUH_
#define ATTN_KERNELS_SRC_CUDA_HOPPER_FWD_KERNEL_CUH_

#include <cuda.h>

#include <cstdint>

#include "device/accumulators.cuh"
#include "device/attention_mask.cuh"
#include "device/online_softmax.cuh"
#include "device/ptx.cuh"
#include "device/smem_tile.cuh"
#include "device/tma.cuh"
#include "device/wgmma.cuh"
#include "fwd_params.h"
#include "hopper_config.h"
#include "sequence_span.cuh"

namespace attn::fa2 {

// The kernel's parameters: the tensor maps of Q, K and V (boxes of 64
// columns x the block's rows, 128-byte swizzled; dimensions head_dim, rows,
// heads, batch — varlen: rows are the packed tokens and batch is 1) and
// the Ampere kernel's FwdParams.
struct HopperFwdParams {
  CUtensorMap q_map;
  CUtensorMap k_map;
  CUtensorMap v_map;
  FwdParams p;
};

template <class Cfg>
struct HopperShape {
  using QTile = SmemTile<Cfg::kHeadDim, Cfg::kBlockM, true, true>;
  using KVTile = SmemTile<Cfg::kHeadDim, Cfg::kBlockN, true, true>;
  static constexpr int kPages = Cfg::kHeadDim / 64;
  static constexpr int kThreads = 128 * (Cfg::kConsumers + 1);
  static constexpr int kConsumerThreads = 128 * Cfg::kConsumers;
  static constexpr int kNTiles = Cfg::kBlockN / 8;   // n8 tiles of S per warp
  static constexpr int kDTiles = Cfg::kHeadDim / 8;  // n8 tiles of O per warp
  static constexpr int kQKSteps = Cfg::kHeadDim / 16;
  static constexpr int kPVSteps = Cfg::kBlockN / 16;
  // Barriers: Q's, then per stage K full, V full, K empty, V empty.
  static constexpr int kBarriers = 1 + 4 * Cfg::kStages;
  static constexpr int kTileBytes = QTile::kBytes + 2 * Cfg::kStages * KVTile::kBytes;
  // 1024 bytes of slack to align the tiles (the swizzle's period).
  static constexpr int kSmemBytes = 1024 + kTileBytes + 8 * kBarriers;

  static_assert(Cfg::kHeadDim % 64 == 0, "tiles are whole 64-column pages");
  static_assert(Cfg::kBlockM == 64 * Cfg::kConsumers, "each consumer owns 64 rows");
  static_assert(Cfg::kBlockN % 16 == 0 && Cfg::kBlockN <= 256, "a wgmma's N");
  static_assert(!Cfg::kPingPong || Cfg::kConsumers >= 2, "ping-pong takes two consumers");
  static_assert(QTile::kPageBytes % 1024 == 0 && KVTile::kPageBytes % 1024 == 0,
                "pages stay 1024-byte aligned");
};

template <class Cfg, class T, bool kEven, bool kMasked>
__global__ void __launch_bounds__(HopperShape<Cfg>::kThreads, 1)
    HopperFwdKernel(const __grid_constant__ HopperFwdParams hp) {
#if defined(__CUDA_ARCH__) && defined(__CUDA_ARCH_FEAT_SM90_ALL)
  using Shape = HopperShape<Cfg>;
  using QTile = typename Shape::QTile;
  using KVTile = typename Shape::KVTile;
  constexpr int kStages = Cfg::kStages;
  constexpr bool kMaskAware = kMasked || !kEven;
  const FwdParams& p = hp.p;

  const int m_block = kMasked ? gridDim.x - 1 - blockIdx.x : blockIdx.x;
  const int head = blockIdx.y;
  const int b = blockIdx.z;
  const SequenceSpan seq = SequenceSpan::Of<false>(p, b);
  if (!kEven && m_block * Cfg::kBlockM >= seq.seqlen_q) return;  // varlen: past this sequence
  const int q_rows =
      kEven ? Cfg::kBlockM : min(Cfg::kBlockM, seq.seqlen_q - m_block * Cfg::kBlockM);

  const BlockMask<Cfg::kBlockM, Cfg::kBlockN> mask{seq.seqlen_k, seq.seqlen_k - seq.seqlen_q,
                                                   p.window_left, p.window_right};
  int n_begin = 0;
  int n_end = (seq.seqlen_k + Cfg::kBlockN - 1) / Cfg::kBlockN;
  if constexpr (kMasked) mask.KeyBlocks(m_block, &n_begin, &n_end);
  const int n_count = max(n_end - n_begin, 0);
  auto block_at = [&](int i) { return n_end - 1 - i; };

  extern __shared__ unsigned char smem[];
  const uint32_t sQ = (SmemAddress(smem) + 1023u) & ~1023u;
  auto sK = [&](int stage) { return sQ + QTile::kBytes + stage * KVTile::kBytes; };
  auto sV = [&](int stage) { return sQ + QTile::kBytes + (kStages + stage) * KVTile::kBytes; };
  const uint32_t bars = sQ + Shape::kTileBytes;
  const uint32_t full_q = bars;
  auto full_k = [&](int stage) { return bars + 8 * (1 + stage); };
  auto full_v = [&](int stage) { return bars + 8 * (1 + kStages + stage); };
  auto empty_k = [&](int stage) { return bars + 8 * (1 + 2 * kStages + stage); };
  auto empty_v = [&](int stage) { return bars + 8 * (1 + 3 * kStages + stage); };

  if (threadIdx.x == 0) {
    Mbarrier::Init(full_q, 1);
    for (int s = 0; s < kStages; ++s) {
      Mbarrier::Init(full_k(s), 1);
      Mbarrier::Init(full_v(s), 1);
      Mbarrier::Init(empty_k(s), Shape::kConsumerThreads);
      Mbarrier::Init(empty_v(s), Shape::kConsumerThreads);
    }
    Mbarrier::FenceInit();
  }
  __syncthreads();

  const int warpgroup = threadIdx.x / 128;
  if (warpgroup == 0) {
    Warpgroup::ReleaseRegisters<Cfg::kProducerRegisters>();
    if (threadIdx.x == 0) {
      // Rows and batch of the maps' coordinates (varlen: packed rows, batch 0).
      const int q_row =
          (p.cu_seqlens_q != nullptr ? p.cu_seqlens_q[b] : 0) + m_block * Cfg::kBlockM;
      const int k_row = p.cu_seqlens_k != nullptr ? p.cu_seqlens_k[b] : 0;
      const int q_batch = p.cu_seqlens_q != nullptr ? 0 : b;
      const int k_batch = p.cu_seqlens_k != nullptr ? 0 : b;
      const int kv_head = head / p.heads_per_kv;
      TmaPrefetchDescriptor(&hp.k_map);
      TmaPrefetchDescriptor(&hp.v_map);
      Mbarrier::ArriveExpectBytes(full_q, QTile::kBytes);
#pragma unroll
      for (int page = 0; page < Shape::kPages; ++page) {
        TmaLoad4d(sQ + page * QTile::kPageBytes, &hp.q_map, full_q, 64 * page, q_row, head,
                  q_batch);
      }
      for (int i = 0; i < n_count; ++i) {
        const int s = i % kStages;
        const uint32_t phase = (i / kStages) & 1;
        const int row = k_row + block_at(i) * Cfg::kBlockN;
        Mbarrier::Wait(empty_k(s), phase ^ 1);
        Mbarrier::ArriveExpectBytes(full_k(s), KVTile::kBytes);
#pragma unroll
        for (int page = 0; page < Shape::kPages; ++page) {
          TmaLoad4d(sK(s) + page * KVTile::kPageBytes, &hp.k_map, full_k(s), 64 * page, row,
                    kv_head, k_batch);
        }
        Mbarrier::Wait(empty_v(s), phase ^ 1);
        Mbarrier::ArriveExpectBytes(full_v(s), KVTile::kBytes);
#pragma unroll
        for (int page = 0; page < Shape::kPages; ++page) {
          TmaLoad4d(sV(s) + page * KVTile::kPageBytes, &hp.v_map, full_v(s), 64 * page, row,
                    kv_head, k_batch);
        }
      }
    }
    return;
  }

  // A consumer: rows [64 c, 64 c + 64) of the tile, warp w rows 16 w.. of them.
  Warpgroup::TakeRegisters<Cfg::kConsumerRegisters>();
  const int consumer = warpgroup - 1;
  const int lane = threadIdx.x % 32;
  const int warp_row0 = 64 * consumer + 16 * ((threadIdx.x % 128) / 32);
  const int q_row0 = m_block * Cfg::kBlockM;
  const uint32_t q_rows_base = sQ + 64 * consumer * 128;

  float acc_o[1][Shape::kDTiles][4];
  ClearAccumulators(acc_o);
  OnlineSoftmax<1, Shape::kNTiles, Shape::kDTiles, true, kMaskAware> softmax;
  softmax.Init();
  Mbarrier::Wait(full_q, 0);

  // The softmax of block i overlaps the P·V of block i-1 (FlashAttention-3's
  // intra-warpgroup overlap): S(i) = Q·K(i)ᵀ and O += P(i-1)·V(i-1) are
  // issued together, the softmax of S(i) runs while P·V is in flight, and
  // O is rescaled once it has landed.
  float acc_s[1][Shape::kNTiles][4];
  uint32_t p_regs[Shape::kPVSteps][4];
  auto issue_qk = [&](int i) {
    const int s = i % kStages;
    Mbarrier::Wait(full_k(s), (i / kStages) & 1);
#pragma unroll
    for (int ks = 0; ks < Shape::kQKSteps; ++ks) {
      const uint32_t in_page = 32 * (ks % 4);  // k16 step within its page
      const uint64_t a = SwizzledDescriptor(q_rows_base + (ks / 4) * QTile::kPageBytes + in_page,
                                            16, 1024);
      const uint64_t bk =
          SwizzledDescriptor(sK(s) + (ks / 4) * KVTile::kPageBytes + in_page, 16, 1024);
      Wgmma<Cfg::kBlockN>::template SS<T, false>(acc_s, a, bk, ks > 0);
    }
    Warpgroup::Commit();
  };
  auto issue_pv = [&](int i) {
    const int s = i % kStages;
    Mbarrier::Wait(full_v(s), (i / kStages) & 1);
#pragma unroll
    for (int ks = 0; ks < Shape::kPVSteps; ++ks) {
      const uint64_t bv = SwizzledDescriptor(sV(s) + ks * 16 * 128, KVTile::kPageBytes, 1024);
      Wgmma<Cfg::kHeadDim>::template RS<T, true>(acc_o, p_regs[ks], bv, true);
    }
    Warpgroup::Commit();
  };
  // Mask and softmax of S(i) into P(i); `alpha` rescales O.
  auto softmax_block = [&](int i, float (&alpha)[1][2]) {
    const int j = block_at(i);
    if constexpr (kMaskAware) {
      if (mask.template NeedsMask<!kEven>(m_block, j)) {
        mask.Apply(acc_s, q_row0 + warp_row0, j * Cfg::kBlockN, lane);
        softmax.template Probabilities<true>(acc_s, p.scale, p.scale_log2, alpha);
        return;
      }
    }
    softmax.template Probabilities<false>(acc_s, p.scale, p.scale_log2, alpha);
  };
  auto pack_p = [&]() {
#pragma unroll
    for (int ks = 0; ks < Shape::kPVSteps; ++ks) {
      p_regs[ks][0] = PackFloat2<T>(acc_s[0][2 * ks][0], acc_s[0][2 * ks][1]);
      p_regs[ks][1] = PackFloat2<T>(acc_s[0][2 * ks][2], acc_s[0][2 * ks][3]);
      p_regs[ks][2] = PackFloat2<T>(acc_s[0][2 * ks + 1][0], acc_s[0][2 * ks + 1][1]);
      p_regs[ks][3] = PackFloat2<T>(acc_s[0][2 * ks + 1][2], acc_s[0][2 * ks + 1][3]);
    }
  };
  // Ping-pong: the consumers issue each block's MMAs in turn, a ring of
  // barriers (kTurnBarrier + consumer, unconditional in the loop: a branch
  // around them makes ptxas serialize the wgmmas): consumer c waits for
  // c-1's turn at the same block, consumer 0 for the last one's at the
  // block before, and for itself at the first (its own arrival here). The
  // turn the last consumer passes at the last block is taken by consumer 0
  // after the loop, so every barrier's arrivals match its waits; all
  // consumers of a CTA visit the same key blocks.
  constexpr int kTurnBarrier = 1 + Cfg::kConsumers;  // after the epilogue's barriers
  if constexpr (Cfg::kPingPong) {
    if (consumer == 0) Warpgroup::ArrivePair(kTurnBarrier);
  }
  if (n_count > 0) {
    float alpha[1][2];
    Warpgroup::FenceOperands(acc_s);
    Warpgroup::Fence();
    issue_qk(0);
    Warpgroup::Wait<0>();
    Warpgroup::FenceOperands(acc_s);
    Mbarrier::Arrive(empty_k(0));
    softmax_block(0, alpha);  // O is still zero: nothing to rescale
    pack_p();
  }
  for (int i = 1; i < n_count; ++i) {
    float alpha[1][2];
    if constexpr (Cfg::kPingPong) Warpgroup::SyncPair(kTurnBarrier + consumer);
    Warpgroup::FenceOperands(acc_s);
    Warpgroup::FenceOperands(acc_o);
    Warpgroup::FenceOperands(p_regs);
    Warpgroup::Fence();
    issue_qk(i);
    issue_pv(i - 1);
    if constexpr (Cfg::kPingPong) {
      Warpgroup::ArrivePair(kTurnBarrier + (consumer + 1) % Cfg::kConsumers);
    }
    Warpgroup::Wait<1>();  // S(i) has landed; P·V may still run
    Warpgroup::FenceOperands(acc_s);
    Mbarrier::Arrive(empty_k(i % kStages));
    softmax_block(i, alpha);
    Warpgroup::Wait<0>();  // O += P(i-1)·V(i-1) has landed
    Warpgroup::FenceOperands(acc_o);
    Mbarrier::Arrive(empty_v((i - 1) % kStages));
    softmax.Rescale(acc_o, alpha);
    pack_p();
  }
  if (n_count > 0) {
    Warpgroup::FenceOperands(acc_o);
    Warpgroup::FenceOperands(p_regs);
    Warpgroup::Fence();
    issue_pv(n_count - 1);
    Warpgroup::Wait<0>();
    Warpgroup::FenceOperands(acc_o);
    Mbarrier::Arrive(empty_v((n_count - 1) % kStages));
  }
  if constexpr (Cfg::kPingPong) {
    if (consumer == 0) Warpgroup::SyncPair(kTurnBarrier);
  }

  // Epilogue: normalise, the LSE, O staged through this consumer's rows of
  // Q (no one reads them any more), then 16-byte stores.
  softmax.Normalize(acc_o);
  const int group = lane / 4;
  const int tig = lane % 4;
  if (p.lse != nullptr && tig == 0) {
    float* lse = p.cu_seqlens_q != nullptr
                     ? p.lse + static_cast<int64_t>(head) * p.total_q + seq.q_start
                     : p.lse + (static_cast<int64_t>(b) * p.heads_q + head) * p.seqlen_q;
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      const int row = warp_row0 + group + 8 * h;
      if (kEven || row < q_rows) lse[q_row0 + row] = softmax.Lse(0, h, p.scale_log2);
    }
  }
#pragma unroll
  for (int h = 0; h < 2; ++h) {
    const int row = warp_row0 + group + 8 * h;
#pragma unroll
    for (int dt = 0; dt < Shape::kDTiles; ++dt) {
      StShared32(sQ + QTile::ChunkOffset(row, dt) + 4 * tig,
                 PackFloat2<T>(acc_o[0][dt][2 * h], acc_o[0][dt][2 * h + 1]));
    }
  }
  Warpgroup::Sync(1 + consumer);
  T* gO = static_cast<T*>(p.o) + seq.o_offset + head * p.o_head_stride +
          static_cast<int64_t>(q_row0) * p.o_row_stride;
  constexpr int kChunks = 64 * QTile::kChunksPerRow;
#pragma unroll
  for (int c = threadIdx.x % 128; c < kChunks; c += 128) {
    const int row = 64 * consumer + c / QTile::kChunksPerRow;
    const int chunk = c % QTile::kChunksPerRow;
    if (kEven || row < q_rows) {
      StGlobal128NoAllocate(gO + row * p.o_row_stride + chunk * kChunkElems,
                            LdShared128(sQ + QTile::ChunkOffset(row, chunk)));
    }
  }
#endif  // sm_90a
}

}  // namespace attn::fa2

#endif  // ATTN_KERNELS_SRC_CUDA_HOPPER_FWD_KERNEL_CUH_
