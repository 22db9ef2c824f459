// Hopper's warpgroup MMA (PTX ISA 9.7.15, wgmma.mma_async; sm_90a only):
// the wrappers the hopper family's kernels call, never inline asm.
//
// A warpgroup (4 consecutive warps, 128 threads) computes D[64 x N] (+)=
// A[64 x 16] · B[16 x N] asynchronously: Fence() before the first wgmma
// whose accumulators or A registers were written by other instructions,
// the wgmma's, Commit() closes a group, Wait<n>() blocks until at most n
// groups are still in flight (only then may the accumulators be read, or
// the shared memory they read be overwritten).
//
// Register layouts (PTX ISA 9.7.15.5.1.1): warp w of the warpgroup owns
// rows 16w..16w+15, and within them the fragments are exactly mma.sync
// m16n8k16's (device/ptx.cuh): D is [1][N/8][4] — n8 tile t holds (row
// groupID, columns 8t + 2tig, +1) and (row groupID + 8, the same columns)
// — and an A operand in registers is m16n8k16's A fragment. So the
// Ampere family's softmax and masks (online_softmax.cuh,
// attention_mask.cuh) run on wgmma accumulators unchanged, and S's
// accumulators become P's A registers as they do there.
//
// Shared-memory operands are described by 64-bit matrix descriptors
// (9.7.15.5.1.2). Every tile here is 128-byte swizzled, as TMA's
// CU_TENSOR_MAP_SWIZZLE_128B writes it and SmemTile<.., kSwizzle, kColumnPages>
// addresses it: pages of [rows x 64] 16-bit elements, 128 bytes a row,
// 16-byte chunk c of row r at chunk c ^ (r % 8), each page 1024-byte aligned.
//   K-major (A = Q, B = K for Q·Kᵀ: the reduction dimension contiguous):
//     stride byte offset 1024 (8 rows), leading byte offset unused (1);
//     k16 step s of a page starts 32·s bytes in (the hardware applies the
//     swizzle to the address it forms), the next page a page further.
//   MN-major (B = V for P·V, imm-trans-b = 1: V's rows are the reduction
//     dimension, head_dim contiguous): stride byte offset 1024 (8 keys),
//     leading byte offset one page (the next 64 columns of head_dim); k16
//     step s starts 16 rows = 2048·s bytes in.
#ifndef ATTN_KERNELS_SRC_CUDA_DEVICE_WGMMA_CUH_
#define ATTN_KERNELS_SRC_CUDA_DEVICE_WGMMA_CUH_

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cstdint>
#include <type_traits>

namespace attn::fa2 {

// A descriptor of a 128-byte-swizzled operand starting at `smem_addr`.
__device__ __forceinline__ uint64_t SwizzledDescriptor(uint32_t smem_addr, uint32_t leading_bytes,
                                                       uint32_t stride_bytes) {
  uint64_t desc = (smem_addr & 0x3FFFFu) >> 4;
  desc |= static_cast<uint64_t>((leading_bytes >> 4) & 0x3FFFu) << 16;
  desc |= static_cast<uint64_t>((stride_bytes >> 4) & 0x3FFFu) << 32;
  desc |= uint64_t{1} << 62;  // layout type 1: 128-byte swizzle
  return desc;
}

struct Warpgroup {
  __device__ __forceinline__ static void Fence() {
    asm volatile("wgmma.fence.sync.aligned;\n" ::: "memory");
  }
  __device__ __forceinline__ static void Commit() {
    asm volatile("wgmma.commit_group.sync.aligned;\n" ::: "memory");
  }
  template <int kPending>
  __device__ __forceinline__ static void Wait() {
    asm volatile("wgmma.wait_group.sync.aligned %0;\n" ::"n"(kPending) : "memory");
  }
  // Keeps the compiler from moving reads or writes of `regs` across the
  // asynchronous MMAs that use them (CUTLASS's warpgroup_fence_operand).
  template <int kRows, int kCols>
  __device__ __forceinline__ static void FenceOperands(float (&regs)[kRows][kCols][4]) {
#pragma unroll
    for (int r = 0; r < kRows; ++r)
#pragma unroll
      for (int c = 0; c < kCols; ++c)
#pragma unroll
        for (int i = 0; i < 4; ++i) asm volatile("" : "+f"(regs[r][c][i])::"memory");
  }
  template <int kSlices>
  __device__ __forceinline__ static void FenceOperands(uint32_t (&regs)[kSlices][4]) {
#pragma unroll
    for (int s = 0; s < kSlices; ++s)
#pragma unroll
      for (int i = 0; i < 4; ++i) asm volatile("" : "+r"(regs[s][i])::"memory");
  }
  // Register budgets (setmaxnreg): a producer warpgroup gives registers
  // back, consumers take them; every warp of the warpgroup executes it.
  template <int kRegisters>
  __device__ __forceinline__ static void ReleaseRegisters() {
    asm volatile("setmaxnreg.dec.sync.aligned.u32 %0;\n" ::"n"(kRegisters));
  }
  template <int kRegisters>
  __device__ __forceinline__ static void TakeRegisters() {
    asm volatile("setmaxnreg.inc.sync.aligned.u32 %0;\n" ::"n"(kRegisters));
  }
  // Barrier `id` (1..15; 0 is __syncthreads) of the warpgroup's 128 threads.
  __device__ __forceinline__ static void Sync(int id) {
    asm volatile("bar.sync %0, 128;\n" ::"r"(id) : "memory");
  }
  // Barrier `id` (1..15) of two warpgroups' 256 threads: one waits on it
  // (SyncPair), the other only signals it (ArrivePair, never blocks).
  __device__ __forceinline__ static void SyncPair(int id) {
    asm volatile("bar.sync %0, 256;\n" ::"r"(id) : "memory");
  }
  __device__ __forceinline__ static void ArrivePair(int id) {
    asm volatile("bar.arrive %0, 256;\n" ::"r"(id) : "memory");
  }
};

// wgmma.mma_async m64nNk16 with fp32 accumulators; `accumulate` false
// overwrites D (scale-d 0). Inline PTX takes no arrays, so each shape's
// operands are listed: ATTN_WGMMA_D<N> the accumulators d[0][0..N/8) as
// "+f" operands %0..%(N/2-1), ATTN_WGMMA_R<N> their names in the asm, each
// N's lists extending the next smaller one's (N a multiple of 16).
template <int N>
struct Wgmma;

#define ATTN_WGMMA_TILE(t) \
  "+f"(d[0][t][0]), "+f"(d[0][t][1]), "+f"(d[0][t][2]), "+f"(d[0][t][3])
#define ATTN_WGMMA_D16 ATTN_WGMMA_TILE(0), ATTN_WGMMA_TILE(1)
#define ATTN_WGMMA_D32 ATTN_WGMMA_D16, ATTN_WGMMA_TILE(2), ATTN_WGMMA_TILE(3)
#define ATTN_WGMMA_D48 ATTN_WGMMA_D32, ATTN_WGMMA_TILE(4), ATTN_WGMMA_TILE(5)
#define ATTN_WGMMA_D64 ATTN_WGMMA_D48, ATTN_WGMMA_TILE(6), ATTN_WGMMA_TILE(7)
#define ATTN_WGMMA_D80 ATTN_WGMMA_D64, ATTN_WGMMA_TILE(8), ATTN_WGMMA_TILE(9)
#define ATTN_WGMMA_D96 ATTN_WGMMA_D80, ATTN_WGMMA_TILE(10), ATTN_WGMMA_TILE(11)
#define ATTN_WGMMA_D112 ATTN_WGMMA_D96, ATTN_WGMMA_TILE(12), ATTN_WGMMA_TILE(13)
#define ATTN_WGMMA_D128 ATTN_WGMMA_D112, ATTN_WGMMA_TILE(14), ATTN_WGMMA_TILE(15)
#define ATTN_WGMMA_D144 ATTN_WGMMA_D128, ATTN_WGMMA_TILE(16), ATTN_WGMMA_TILE(17)
#define ATTN_WGMMA_D160 ATTN_WGMMA_D144, ATTN_WGMMA_TILE(18), ATTN_WGMMA_TILE(19)
#define ATTN_WGMMA_D176 ATTN_WGMMA_D160, ATTN_WGMMA_TILE(20), ATTN_WGMMA_TILE(21)
#define ATTN_WGMMA_D192 ATTN_WGMMA_D176, ATTN_WGMMA_TILE(22), ATTN_WGMMA_TILE(23)
#define ATTN_WGMMA_D208 ATTN_WGMMA_D192, ATTN_WGMMA_TILE(24), ATTN_WGMMA_TILE(25)
#define ATTN_WGMMA_D224 ATTN_WGMMA_D208, ATTN_WGMMA_TILE(26), ATTN_WGMMA_TILE(27)
#define ATTN_WGMMA_D240 ATTN_WGMMA_D224, ATTN_WGMMA_TILE(28), ATTN_WGMMA_TILE(29)
#define ATTN_WGMMA_D256 ATTN_WGMMA_D240, ATTN_WGMMA_TILE(30), ATTN_WGMMA_TILE(31)
#define ATTN_WGMMA_R16 "%0, %1, %2, %3, %4, %5, %6, %7"
#define ATTN_WGMMA_R32 ATTN_WGMMA_R16 ", %8, %9, %10, %11, %12, %13, %14, %15"
#define ATTN_WGMMA_R48 ATTN_WGMMA_R32 ", %16, %17, %18, %19, %20, %21, %22, %23"
#define ATTN_WGMMA_R64 ATTN_WGMMA_R48 ", %24, %25, %26, %27, %28, %29, %30, %31"
#define ATTN_WGMMA_R80 ATTN_WGMMA_R64 ", %32, %33, %34, %35, %36, %37, %38, %39"
#define ATTN_WGMMA_R96 ATTN_WGMMA_R80 ", %40, %41, %42, %43, %44, %45, %46, %47"
#define ATTN_WGMMA_R112 ATTN_WGMMA_R96 ", %48, %49, %50, %51, %52, %53, %54, %55"
#define ATTN_WGMMA_R128 ATTN_WGMMA_R112 ", %56, %57, %58, %59, %60, %61, %62, %63"
#define ATTN_WGMMA_R144 ATTN_WGMMA_R128 ", %64, %65, %66, %67, %68, %69, %70, %71"
#define ATTN_WGMMA_R160 ATTN_WGMMA_R144 ", %72, %73, %74, %75, %76, %77, %78, %79"
#define ATTN_WGMMA_R176 ATTN_WGMMA_R160 ", %80, %81, %82, %83, %84, %85, %86, %87"
#define ATTN_WGMMA_R192 ATTN_WGMMA_R176 ", %88, %89, %90, %91, %92, %93, %94, %95"
#define ATTN_WGMMA_R208 ATTN_WGMMA_R192 ", %96, %97, %98, %99, %100, %101, %102, %103"
#define ATTN_WGMMA_R224 ATTN_WGMMA_R208 ", %104, %105, %106, %107, %108, %109, %110, %111"
#define ATTN_WGMMA_R240 ATTN_WGMMA_R224 ", %112, %113, %114, %115, %116, %117, %118, %119"
#define ATTN_WGMMA_R256 ATTN_WGMMA_R240 ", %120, %121, %122, %123, %124, %125, %126, %127"

// The asm of one wgmma: the shape N, the operand numbers after the
// accumulators (X0.. = N/2..), the element types' PTX name and imm-trans-b.
// SS: A and B in shared memory (descriptors X0, X1; scale-d from X2).
#define ATTN_WGMMA_SS_ASM(N, X0, X1, X2, TYPES, TRANS_B)                                   \
  asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %" #X2 ", 0;\n"                            \
               "wgmma.mma_async.sync.aligned.m64n" #N "k16.f32." TYPES " {" ATTN_WGMMA_R##N \
               "}, %" #X0 ", %" #X1 ", p, 1, 1, 0, " TRANS_B ";\n}\n"                       \
               : ATTN_WGMMA_D##N                                                          \
               : "l"(desc_a), "l"(desc_b), "r"(static_cast<int>(accumulate)))
// RS: A in registers X0..X3 (the m16n8k16 A fragment of each warp's 16
// rows), B's descriptor X4, scale-d from X5.
#define ATTN_WGMMA_RS_ASM(N, X0, X1, X2, X3, X4, X5, TYPES, TRANS_B)                       \
  asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %" #X5 ", 0;\n"                            \
               "wgmma.mma_async.sync.aligned.m64n" #N "k16.f32." TYPES " {" ATTN_WGMMA_R##N \
               "}, {%" #X0 ", %" #X1 ", %" #X2 ", %" #X3 "}, %" #X4 ", p, 1, 1, " TRANS_B    \
               ";\n}\n"                                                                   \
               : ATTN_WGMMA_D##N                                                          \
               : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(desc_b),                 \
                 "r"(static_cast<int>(accumulate)))

// OP(args..., types, imm-trans-b) for T and kTransB.
#define ATTN_WGMMA_DISPATCH(OP, ...)                          \
  if constexpr (std::is_same_v<T, __nv_bfloat16>) {           \
    if constexpr (kTransB) {                                  \
      OP(__VA_ARGS__, "bf16.bf16", "1");                      \
    } else {                                                  \
      OP(__VA_ARGS__, "bf16.bf16", "0");                      \
    }                                                         \
  } else {                                                    \
    static_assert(std::is_same_v<T, __half>, "fp16 or bf16"); \
    if constexpr (kTransB) {                                  \
      OP(__VA_ARGS__, "f16.f16", "1");                        \
    } else {                                                  \
      OP(__VA_ARGS__, "f16.f16", "0");                        \
    }                                                         \
  }

// Wgmma<N>: SS and RS of D[64 x N] (+)= A[64 x 16] · B[16 x N]; X0..X5
// must be N/2..N/2+5 (the preprocessor cannot add).
#define ATTN_WGMMA_SHAPE(N, X0, X1, X2, X3, X4, X5)                                          \
  template <>                                                                                 \
  struct Wgmma<N> {                                                                           \
    template <class T, bool kTransB>                                                          \
    __device__ __forceinline__ static void SS(float (&d)[1][N / 8][4], uint64_t desc_a,       \
                                              uint64_t desc_b, bool accumulate) {             \
      ATTN_WGMMA_DISPATCH(ATTN_WGMMA_SS_ASM, N, X0, X1, X2)                                   \
    }                                                                                         \
    template <class T, bool kTransB>                                                          \
    __device__ __forceinline__ static void RS(float (&d)[1][N / 8][4], const uint32_t (&a)[4], \
                                              uint64_t desc_b, bool accumulate) {             \
      ATTN_WGMMA_DISPATCH(ATTN_WGMMA_RS_ASM, N, X0, X1, X2, X3, X4, X5)                       \
    }                                                                                         \
  };

// The shapes the hopper family's tiles use (S's N = kBlockN, O's N = head_dim).
ATTN_WGMMA_SHAPE(64, 32, 33, 34, 35, 36, 37)
ATTN_WGMMA_SHAPE(80, 40, 41, 42, 43, 44, 45)
ATTN_WGMMA_SHAPE(128, 64, 65, 66, 67, 68, 69)
ATTN_WGMMA_SHAPE(176, 88, 89, 90, 91, 92, 93)
ATTN_WGMMA_SHAPE(256, 128, 129, 130, 131, 132, 133)

#undef ATTN_WGMMA_SHAPE
#undef ATTN_WGMMA_DISPATCH
#undef ATTN_WGMMA_SS_ASM
#undef ATTN_WGMMA_RS_ASM
#undef ATTN_WGMMA_TILE
#undef ATTN_WGMMA_D16
#undef ATTN_WGMMA_D32
#undef ATTN_WGMMA_D48
#undef ATTN_WGMMA_D64
#undef ATTN_WGMMA_D80
#undef ATTN_WGMMA_D96
#undef ATTN_WGMMA_D112
#undef ATTN_WGMMA_D128
#undef ATTN_WGMMA_D144
#undef ATTN_WGMMA_D160
#undef ATTN_WGMMA_D176
#undef ATTN_WGMMA_D192
#undef ATTN_WGMMA_D208
#undef ATTN_WGMMA_D224
#undef ATTN_WGMMA_D240
#undef ATTN_WGMMA_D256
#undef ATTN_WGMMA_R16
#undef ATTN_WGMMA_R32
#undef ATTN_WGMMA_R48
#undef ATTN_WGMMA_R64
#undef ATTN_WGMMA_R80
#undef ATTN_WGMMA_R96
#undef ATTN_WGMMA_R112
#undef ATTN_WGMMA_R128
#undef ATTN_WGMMA_R144
#undef ATTN_WGMMA_R160
#undef ATTN_WGMMA_R176
#undef ATTN_WGMMA_R192
#undef ATTN_WGMMA_R208
#undef ATTN_WGMMA_R224
#undef ATTN_WGMMA_R240
#undef ATTN_WGMMA_R256

}  // namespace attn::fa2

#endif  // ATTN_KERNELS_SRC_CUDA_DEVICE_WGMMA_CUH_
