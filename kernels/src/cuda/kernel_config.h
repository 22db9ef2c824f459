// The knobs of the FlashAttention-2 kernel template (flash_fwd_kernel.cuh)
// as named building blocks, and KernelConfig, which assembles one
// configuration from one block of each kind. The production kernel
// (flash_fwd_configs.h) and the ladder (kernels/ladder/) are both built from
// these blocks; the kernel reads only the flat constants. Plain C++: host
// code includes this header too.
#ifndef ATTN_KERNELS_SRC_CUDA_KERNEL_CONFIG_H_
#define ATTN_KERNELS_SRC_CUDA_KERNEL_CONFIG_H_

namespace attn::fa2 {

// The tile one CTA computes.
template <int HeadDim, int BlockM, int BlockN, int NumWarps>
struct TileShape {
  static constexpr int kHeadDim = HeadDim;
  static constexpr int kBlockM = BlockM;     // query rows per CTA (B_r)
  static constexpr int kBlockN = BlockN;     // key/value rows per main-loop step (B_c)
  static constexpr int kNumWarps = NumWarps;  // each owns kBlockM / kNumWarps query rows
  static constexpr int kMinBlocksPerSm = 1;  // __launch_bounds__ occupancy hint
};

// How the mma operands reach registers from shared memory.
//   kQInRegisters: Q is ldmatrix'ed once and stays in registers (else it is
//                  re-read every key block, slice by slice with K);
//   kKSliced / kVSliced: Q·Kᵀ / P·V reduce in 16-wide slices, each loaded
//                  right before its mma's (else the whole block first);
//   kRfDoubleBuffer: slice s+1 is loaded before the mma's of slice s.
struct WholeBlockOperands {
  static constexpr bool kQInRegisters = true;
  static constexpr bool kKSliced = false;
  static constexpr bool kVSliced = false;
  static constexpr bool kRfDoubleBuffer = false;
};
struct SlicedOperands {
  static constexpr bool kQInRegisters = false;
  static constexpr bool kKSliced = true;
  static constexpr bool kVSliced = true;
  static constexpr bool kRfDoubleBuffer = false;
};

// Shared-memory layout and addressing.
//   kSwizzle: 16-byte chunks XOR-swizzled by row (no bank conflicts);
//   kSignedStrideSwizzle: ldmatrix addresses as a per-thread base plus one
//                  of four signed deltas (no XOR per load);
//   kEncodedEpilogue: O's register->shared stores from eight precomputed
//                  swizzle places;
//   kColumnTiles: tiles stored as head_dim/64 pages of 64 columns.
struct PlainSmem {
  static constexpr bool kSwizzle = false;
  static constexpr bool kSignedStrideSwizzle = false;
  static constexpr bool kEncodedEpilogue = false;
  static constexpr bool kColumnTiles = false;
};
struct SwizzledSmem {
  static constexpr bool kSwizzle = true;
  static constexpr bool kSignedStrideSwizzle = true;
  static constexpr bool kEncodedEpilogue = true;
  static constexpr bool kColumnTiles = false;
};

// The main loop's schedule and arithmetic.
//   kEagerKV: V(j) and K(j+1) issued before the compute that precedes their
//             use (K/V ping-pong);
//   kExp2Softmax: exp2 with scale·log2(e) folded into one FFMA per score;
//   kSerpentineMma: mma loops N outer, M inner, serpentine;
//   kPeelFirstBlock: the first key block without rescale, O zeroed by it;
//   kBackwardKV: key blocks from last to first (FA2's order).
struct SimpleMainLoop {
  static constexpr bool kEagerKV = false;
  static constexpr bool kExp2Softmax = false;
  static constexpr bool kSerpentineMma = false;
  static constexpr bool kPeelFirstBlock = false;
  static constexpr bool kBackwardKV = false;
};
struct PipelinedMainLoop {
  static constexpr bool kEagerKV = true;
  static constexpr bool kExp2Softmax = true;
  static constexpr bool kSerpentineMma = true;
  static constexpr bool kPeelFirstBlock = true;
  static constexpr bool kBackwardKV = true;
};

// Global-memory access.
//   kNoAllocateStores: O stored with st.global.L1::no_allocate (write-once
//                  data) and the largest shared-memory carveout asked for;
//   kStaticRowStride: 0, or the one row stride compiled in as an immediate
//                  (a specialisation: the configuration then names the
//                  `General` one other strides run).
struct CachedGlobal {
  static constexpr bool kNoAllocateStores = false;
  static constexpr int kStaticRowStride = 0;
};
struct StreamingGlobal {
  static constexpr bool kNoAllocateStores = true;
  static constexpr int kStaticRowStride = 0;
};

// How query rows map onto a CTA's tile.
//   kPackGqa: the tile's rows are (query row, query head of one KV group)
//             pairs, row g = query (g / group) of head (kv_head * group +
//             g % group), so K/V are read once per group instead of once per
//             query head (decode, speculative decode: few query rows). The
//             grid's y is then the KV head.
struct RowPerQuery {
  static constexpr bool kPackGqa = false;
};
struct GqaPackedRows {
  static constexpr bool kPackGqa = true;
};

// One configuration: a block of each kind (their constants are disjoint).
// A configuration may derive from one and override single constants.
template <class Shape, class Operands, class Smem, class MainLoop, class Global,
          class Rows = RowPerQuery>
struct KernelConfig : Shape, Operands, Smem, MainLoop, Global, Rows {};

// True when A and B set every knob the kernel reads to the same value, so
// they compile to the same code.
template <class A, class B>
constexpr bool SameKnobs() {
  return A::kHeadDim == B::kHeadDim && A::kBlockM == B::kBlockM && A::kBlockN == B::kBlockN &&
         A::kNumWarps == B::kNumWarps && A::kMinBlocksPerSm == B::kMinBlocksPerSm &&
         A::kQInRegisters == B::kQInRegisters && A::kKSliced == B::kKSliced &&
         A::kVSliced == B::kVSliced && A::kRfDoubleBuffer == B::kRfDoubleBuffer &&
         A::kSwizzle == B::kSwizzle && A::kSignedStrideSwizzle == B::kSignedStrideSwizzle &&
         A::kEncodedEpilogue == B::kEncodedEpilogue && A::kColumnTiles == B::kColumnTiles &&
         A::kEagerKV == B::kEagerKV && A::kExp2Softmax == B::kExp2Softmax &&
         A::kSerpentineMma == B::kSerpentineMma && A::kPeelFirstBlock == B::kPeelFirstBlock &&
         A::kBackwardKV == B::kBackwardKV && A::kNoAllocateStores == B::kNoAllocateStores &&
         A::kStaticRowStride == B::kStaticRowStride && A::kPackGqa == B::kPackGqa;
}

}  // namespace attn::fa2

#endif  // ATTN_KERNELS_SRC_CUDA_KERNEL_CONFIG_H_
