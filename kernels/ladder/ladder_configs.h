// The FlashAttention-2 ladder as configurations of one kernel template
// (flash_fwd_kernel.cuh). Step 1 is assembled from the building blocks of
// kernel_config.h with every switch off; each later step is the previous
// step plus the switch it introduces (the constants are described there).
// Plain C++: the host registry includes this header too.
#ifndef ATTN_KERNELS_SRC_CUDA_LADDER_CONFIGS_H_
#define ATTN_KERNELS_SRC_CUDA_LADDER_CONFIGS_H_

#include "flash_fwd_configs.h"
#include "kernel_config.h"

namespace attn::fa2 {

// Step 1 — base: mma.m16n8k16 + ldmatrix + cp.async, 64x64 tiles, 4 warps
// (16 query rows each), at the seed's head_dim 128. Q is ldmatrix'ed into
// registers once; each K and V block is loaded whole into registers before
// its GEMM; K and V are fetched one after the other, each waited for before
// use. Every later switch is off.
struct K01Base : KernelConfig<TileShape<128, 64, 64, 4>, WholeBlockOperands, PlainSmem,
                              SimpleMainLoop, CachedGlobal> {};

// Step 2 — XOR-swizzled shared memory: no bank conflicts for cp.async,
// ldmatrix or the output stores, at no memory cost.
struct K02Swizzle : K01Base {
  static constexpr bool kSwizzle = true;
};

// Step 3 — eager K/V loads: V(j) is issued before Q·K(j)ᵀ and K(j+1) before
// the softmax and P·V(j), so global loads overlap compute (K/V ping-pong).
struct K03EagerKV : K02Swizzle {
  static constexpr bool kEagerKV = true;
};

// Step 4 — interleave shared->register loads with the mma's: each GEMM's
// reduction runs in 16-wide slices, loading a slice right before its mma's.
// Q is re-read from shared memory every block instead of living in registers.
struct K04Sliced : K03EagerKV {
  static constexpr bool kQInRegisters = false;
  static constexpr bool kKSliced = true;
  static constexpr bool kVSliced = true;
};

// Step 5 — double-buffer the register fragments: slice s+1 is loaded before
// the mma's of slice s.
struct K05RfDoubleBuffer : K04Sliced {
  static constexpr bool kRfDoubleBuffer = true;
};

// Step 6 — FP32 throughput: exp2 with the scale pre-multiplied by log2(e),
// one FFMA + EX2 per score.
struct K06Exp2Softmax : K05RfDoubleBuffer {
  static constexpr bool kExp2Softmax = true;
};

// Step 7 — auto-tuning: step 6's kernel over a space of tile shapes, warp
// counts and register-load granularities (K7<Tile>), named by their fields.
// attn_tune times every candidate on the GPU it runs on; the library picks
// the winner per (device, step) (kernels/tuning/, attn/tuning.h).
struct Tile64x64W4QRegs : K06Exp2Softmax {  // Q in registers, K/V sliced
  static constexpr int kBlockM = 64;
  static constexpr int kBlockN = 64;
  static constexpr int kNumWarps = 4;
  static constexpr bool kQInRegisters = true;
  static constexpr bool kRfDoubleBuffer = false;
};
struct Tile64x64W4SlicedDb : K06Exp2Softmax {  // Q/K/V sliced, double-buffered
  static constexpr int kBlockM = 64;
  static constexpr int kBlockN = 64;
};
struct Tile64x128W4SlicedDb : K06Exp2Softmax {
  static constexpr int kBlockM = 64;
  static constexpr int kBlockN = 128;
};
struct Tile128x32W4SlicedDb : K06Exp2Softmax {
  static constexpr int kBlockM = 128;
  static constexpr int kBlockN = 32;
};
struct Tile128x64W4Sliced : K06Exp2Softmax {  // the H200 winner and FA2's tile
  static constexpr int kBlockM = 128;
  static constexpr int kBlockN = 64;
  static constexpr bool kRfDoubleBuffer = false;
};
struct Tile128x64W4SlicedDb : K06Exp2Softmax {
  static constexpr int kBlockM = 128;
  static constexpr int kBlockN = 64;
};
struct Tile128x64W8SlicedDb : K06Exp2Softmax {
  static constexpr int kBlockM = 128;
  static constexpr int kBlockN = 64;
  static constexpr int kNumWarps = 8;
};
struct Tile128x128W8SlicedDb : K06Exp2Softmax {
  static constexpr int kBlockM = 128;
  static constexpr int kBlockN = 128;
  static constexpr int kNumWarps = 8;
};

// Steps 8–16 each add their switch on top of a step-7 tile (any of them; the
// build instantiates the tiles the tuning tables use).

// Step 8 — strength-reduced address math: the swizzled chunk of every
// ldmatrix is a per-thread base plus one of four precomputed signed deltas
// (chosen at compile time), so no XOR (LOP3) per load. Per-thread bases and
// constant row steps for cp.async are already in every earlier step.
template <class Tile>
struct K08SignedStrides : Tile {
  static constexpr bool kSignedStrideSwizzle = true;
};

// Step 9 — mma order: N outer, M inner, serpentine (M reversed on odd n), so
// consecutive mma's share an operand. The lane maps that deliver ldmatrix
// fragments in mma order (the seed's step-9 fix) are in every step already.
template <class Tile>
struct K09Serpentine : K08SignedStrides<Tile> {
  static constexpr bool kSerpentineMma = true;
};

// Step 10 — the first key block peeled: its max is taken as is, nothing is
// rescaled, the row sum is assigned, and O's accumulators are zeroed right
// before its first P·V mma (ptxas then feeds RZ; no CS2R zero-fill).
template <class Tile>
struct K10PeeledFirst : K09Serpentine<Tile> {
  static constexpr bool kPeelFirstBlock = true;
};

// Step 11 — encoded swizzle in the epilogue: O's register -> shared stores
// use a per-thread base plus precomputed signed deltas, no XOR per store.
template <class Tile>
struct K11EncodedEpilogue : K10PeeledFirst<Tile> {
  static constexpr bool kEncodedEpilogue = true;
};

// Step 12 — the seed's clean-ups (block addressing as base + j·B_c·stride,
// int64 strides, one reciprocal per row) are in every step of this template
// already: step 12 is step 11, kept so the table has every row.
template <class Tile>
struct K12Cleanups : K11EncodedEpilogue<Tile> {};

// Step 13 — key blocks from last to first (FA2's order): the prologue loads
// the last K block and each iteration prefetches the one before.
template <class Tile>
struct K13Backward : K12Cleanups<Tile> {
  static constexpr bool kBackwardKV = true;
};

// Step 14 — cache configuration: O is stored without allocating in L1
// (st.global.L1::no_allocate; write-once data) and the kernel asks for the
// largest shared-memory carveout.
template <class Tile>
struct K14CacheConfig : K13Backward<Tile> {
  static constexpr bool kNoAllocateStores = true;
};

// Step 15 — tiling along head_dim: shared tiles stored as head_dim/64
// column pages of [rows x 64] (128-byte rows, Swizzle<3,3,3> inside), FA2's
// layout atom.
template <class Tile>
struct K15ColumnTiles : K14CacheConfig<Tile> {
  static constexpr bool kColumnTiles = true;
};

// Step 16 — static global-memory row stride: a specialisation for dense
// [B, S, 16, 128] tensors (row stride 2048 elements), so block and row
// offsets are immediates; any other stride runs step 15's kernel.
template <class Tile>
struct K16StaticStrides : K15ColumnTiles<Tile> {
  static constexpr int kStaticRowStride = 16 * 128;
  using General = K15ColumnTiles<Tile>;  // what other strides run
};

// flash_fwd is step 14 on the 128x64 tile at head_dim 128, built from the
// same blocks rather than from this step: checked here, so the ladder's
// table keeps comparing like with like.
static_assert(SameKnobs<K14CacheConfig<Tile128x64W4Sliced>, FlashFwdHdim128>(),
              "flash_fwd at head_dim 128 is no longer ladder step 14 on the 128x64 tile: "
              "update this check and the ladder's description in kernels/README.md");

}  // namespace attn::fa2

#endif  // ATTN_KERNELS_SRC_CUDA_LADDER_CONFIGS_H_
