// The FlashAttention-2 ladder as configurations of one kernel template
// (flash_fwd_kernel.cuh). Each step is the previous step plus the switch it
// introduces; the kernel reads only these constants. Plain C++: the host
// registry includes this header too.
#ifndef ATTN_KERNELS_SRC_CUDA_LADDER_CONFIGS_H_
#define ATTN_KERNELS_SRC_CUDA_LADDER_CONFIGS_H_

namespace attn::fa2 {

// Step 1 — base: mma.m16n8k16 + ldmatrix + cp.async, 64x64 tiles, 4 warps
// (16 query rows each). Q is ldmatrix'ed into registers once; each K and V
// block is loaded whole into registers before its GEMM; K and V are fetched
// one after the other, each waited for before use.
struct K01Base {
  static constexpr int kHeadDim = 128;   // the seed's head_dim
  static constexpr int kBlockM = 64;     // query rows per CTA (B_r)
  static constexpr int kBlockN = 64;     // key/value rows per main-loop step (B_c)
  static constexpr int kNumWarps = 4;
  static constexpr int kMinBlocksPerSm = 1;  // __launch_bounds__ occupancy hint
  static constexpr bool kSwizzle = false;        // step 2
  static constexpr bool kEagerKV = false;        // step 3
  static constexpr bool kQInRegisters = true;    // step 4 turns this off ...
  static constexpr bool kKSliced = false;        // ... and these on
  static constexpr bool kVSliced = false;
  static constexpr bool kRfDoubleBuffer = false;  // step 5
  static constexpr bool kExp2Softmax = false;     // step 6
};

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
// counts and register-load granularities. attn_tune times every candidate on
// the GPU it runs on; the library picks the winner by device name
// (kernels/tuning/).
template <int BlockM, int BlockN, int NumWarps, bool QInRegisters, bool KVSliced,
          bool DoubleBuffer>
struct K07Candidate : K06Exp2Softmax {
  static constexpr int kBlockM = BlockM;
  static constexpr int kBlockN = BlockN;
  static constexpr int kNumWarps = NumWarps;
  static constexpr bool kQInRegisters = QInRegisters;
  static constexpr bool kKSliced = KVSliced;
  static constexpr bool kVSliced = KVSliced;
  static constexpr bool kRfDoubleBuffer = DoubleBuffer;
};

// The production kernel ("flash_fwd"): step 6's kernel with every breadth
// feature (chosen at launch by the kernel's kEven/kMasked switches), one
// tile per head_dim. head_dim 128 takes step 7's winner on the H200 and
// FA2's own choice (128x64, 4 warps, Q/K/V sliced); the others follow FA2's
// run_mha_fwd_hdim* for sm80/sm90, with 128x64 where FA2 uses 128x128 for
// head_dim 64 (our P stays in separate registers, and 128x128 would spill)
// and 8 warps for head_dim 96 (its chunk-by-chunk copies spill at 4 warps).
template <int HeadDim, int BlockM, int BlockN, int NumWarps>
struct FlashFwdTile : K06Exp2Softmax {
  static constexpr int kHeadDim = HeadDim;
  static constexpr int kBlockM = BlockM;
  static constexpr int kBlockN = BlockN;
  static constexpr int kNumWarps = NumWarps;
  static constexpr bool kQInRegisters = false;
  static constexpr bool kKSliced = true;
  static constexpr bool kVSliced = true;
  static constexpr bool kRfDoubleBuffer = false;
};
using FlashFwdHdim64 = FlashFwdTile<64, 128, 64, 4>;
using FlashFwdHdim96 = FlashFwdTile<96, 128, 64, 8>;
using FlashFwdHdim128 = FlashFwdTile<128, 128, 64, 4>;
using FlashFwdHdim192 = FlashFwdTile<192, 128, 64, 8>;
using FlashFwdHdim256 = FlashFwdTile<256, 128, 64, 8>;

}  // namespace attn::fa2

#endif  // ATTN_KERNELS_SRC_CUDA_LADDER_CONFIGS_H_
