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

// The element types' PTX names and imm-trans-b, for the asm below.
#define ATTN_WGMMA_DISPATCH(OP)                          \
  if constexpr (std::is_same_v<T, __nv_bfloat16>) {      \
    if constexpr (kTransB) {                             \
      OP("bf16.bf16", "1");                              \
    } else {                                             \
      OP("bf16.bf16", "0");                              \
    }                                                    \
  } else {                                               \
    static_assert(std::is_same_v<T, __half>, "fp16 or bf16"); \
    if constexpr (kTransB) {                             \
      OP("f16.f16", "1");                                \
    } else {                                             \
      OP("f16.f16", "0");                                \
    }                                                    \
  }

// wgmma.mma_async m64nNk16 with fp32 accumulators; `accumulate` false
// overwrites D (scale-d 0). The operand lists are written out because
// inline PTX takes no arrays.
template <int N>
struct Wgmma;

// Each N's accumulator operands extend the smaller N's.
#define ATTN_WGMMA_D64_OPERANDS \
        "+f"(d[0][0][0]), "+f"(d[0][0][1]), "+f"(d[0][0][2]), "+f"(d[0][0][3]), \
        "+f"(d[0][1][0]), "+f"(d[0][1][1]), "+f"(d[0][1][2]), "+f"(d[0][1][3]), \
        "+f"(d[0][2][0]), "+f"(d[0][2][1]), "+f"(d[0][2][2]), "+f"(d[0][2][3]), \
        "+f"(d[0][3][0]), "+f"(d[0][3][1]), "+f"(d[0][3][2]), "+f"(d[0][3][3]), \
        "+f"(d[0][4][0]), "+f"(d[0][4][1]), "+f"(d[0][4][2]), "+f"(d[0][4][3]), \
        "+f"(d[0][5][0]), "+f"(d[0][5][1]), "+f"(d[0][5][2]), "+f"(d[0][5][3]), \
        "+f"(d[0][6][0]), "+f"(d[0][6][1]), "+f"(d[0][6][2]), "+f"(d[0][6][3]), \
        "+f"(d[0][7][0]), "+f"(d[0][7][1]), "+f"(d[0][7][2]), "+f"(d[0][7][3])

#define ATTN_WGMMA_D128_OPERANDS ATTN_WGMMA_D64_OPERANDS, \
        "+f"(d[0][8][0]), "+f"(d[0][8][1]), "+f"(d[0][8][2]), "+f"(d[0][8][3]), \
        "+f"(d[0][9][0]), "+f"(d[0][9][1]), "+f"(d[0][9][2]), "+f"(d[0][9][3]), \
        "+f"(d[0][10][0]), "+f"(d[0][10][1]), "+f"(d[0][10][2]), "+f"(d[0][10][3]), \
        "+f"(d[0][11][0]), "+f"(d[0][11][1]), "+f"(d[0][11][2]), "+f"(d[0][11][3]), \
        "+f"(d[0][12][0]), "+f"(d[0][12][1]), "+f"(d[0][12][2]), "+f"(d[0][12][3]), \
        "+f"(d[0][13][0]), "+f"(d[0][13][1]), "+f"(d[0][13][2]), "+f"(d[0][13][3]), \
        "+f"(d[0][14][0]), "+f"(d[0][14][1]), "+f"(d[0][14][2]), "+f"(d[0][14][3]), \
        "+f"(d[0][15][0]), "+f"(d[0][15][1]), "+f"(d[0][15][2]), "+f"(d[0][15][3])

#define ATTN_WGMMA_D176_OPERANDS ATTN_WGMMA_D128_OPERANDS, \
        "+f"(d[0][16][0]), "+f"(d[0][16][1]), "+f"(d[0][16][2]), "+f"(d[0][16][3]), \
        "+f"(d[0][17][0]), "+f"(d[0][17][1]), "+f"(d[0][17][2]), "+f"(d[0][17][3]), \
        "+f"(d[0][18][0]), "+f"(d[0][18][1]), "+f"(d[0][18][2]), "+f"(d[0][18][3]), \
        "+f"(d[0][19][0]), "+f"(d[0][19][1]), "+f"(d[0][19][2]), "+f"(d[0][19][3]), \
        "+f"(d[0][20][0]), "+f"(d[0][20][1]), "+f"(d[0][20][2]), "+f"(d[0][20][3]), \
        "+f"(d[0][21][0]), "+f"(d[0][21][1]), "+f"(d[0][21][2]), "+f"(d[0][21][3])

template <>
struct Wgmma<64> {
  // D[64 x 64] (+)= A[64 x 16] · B[16 x 64], A and B in shared memory.
  template <class T, bool kTransB>
  __device__ __forceinline__ static void SS(float (&d)[1][8][4], uint64_t desc_a,
                                            uint64_t desc_b, bool accumulate) {
#define ATTN_WGMMA_SS(TYPES, TRANS_B)                                              \
  asm volatile(                                                                  \
      "{\n.reg .pred p;\nsetp.ne.b32 p, %34, 0;\n"                          \
      "wgmma.mma_async.sync.aligned.m64n64k16.f32." TYPES " {"                      \
      "%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15,"  \
      "%16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31" \
      "}, %32, %33, p, 1, 1, 0, " TRANS_B ";\n}\n"                          \
      : ATTN_WGMMA_D64_OPERANDS                                                    \
      : "l"(desc_a), "l"(desc_b), "r"(static_cast<int>(accumulate)))
    ATTN_WGMMA_DISPATCH(ATTN_WGMMA_SS);
#undef ATTN_WGMMA_SS
  }

  // D[64 x 64] (+)= A[64 x 16] · B[16 x 64], A in registers (the m16n8k16
  // A fragment of each warp's 16 rows), B in shared memory.
  template <class T, bool kTransB>
  __device__ __forceinline__ static void RS(float (&d)[1][8][4], const uint32_t (&a)[4],
                                            uint64_t desc_b, bool accumulate) {
#define ATTN_WGMMA_RS(TYPES, TRANS_B)                                              \
  asm volatile(                                                                  \
      "{\n.reg .pred p;\nsetp.ne.b32 p, %37, 0;\n"                          \
      "wgmma.mma_async.sync.aligned.m64n64k16.f32." TYPES " {"                      \
      "%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15,"  \
      "%16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31" \
      "}, {%32, %33, %34, %35}, %36, p, 1, 1, " TRANS_B ";\n}\n"   \
      : ATTN_WGMMA_D64_OPERANDS                                                    \
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(desc_b),                 \
        "r"(static_cast<int>(accumulate)))
    ATTN_WGMMA_DISPATCH(ATTN_WGMMA_RS);
#undef ATTN_WGMMA_RS
  }
};

template <>
struct Wgmma<128> {
  // D[64 x 128] (+)= A[64 x 16] · B[16 x 128], A and B in shared memory.
  template <class T, bool kTransB>
  __device__ __forceinline__ static void SS(float (&d)[1][16][4], uint64_t desc_a,
                                            uint64_t desc_b, bool accumulate) {
#define ATTN_WGMMA_SS(TYPES, TRANS_B)                                              \
  asm volatile(                                                                  \
      "{\n.reg .pred p;\nsetp.ne.b32 p, %66, 0;\n"                          \
      "wgmma.mma_async.sync.aligned.m64n128k16.f32." TYPES " {"                      \
      "%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15,"  \
      "%16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31," \
      "%32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47," \
      "%48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63" \
      "}, %64, %65, p, 1, 1, 0, " TRANS_B ";\n}\n"                          \
      : ATTN_WGMMA_D128_OPERANDS                                                    \
      : "l"(desc_a), "l"(desc_b), "r"(static_cast<int>(accumulate)))
    ATTN_WGMMA_DISPATCH(ATTN_WGMMA_SS);
#undef ATTN_WGMMA_SS
  }

  // D[64 x 128] (+)= A[64 x 16] · B[16 x 128], A in registers (the m16n8k16
  // A fragment of each warp's 16 rows), B in shared memory.
  template <class T, bool kTransB>
  __device__ __forceinline__ static void RS(float (&d)[1][16][4], const uint32_t (&a)[4],
                                            uint64_t desc_b, bool accumulate) {
#define ATTN_WGMMA_RS(TYPES, TRANS_B)                                              \
  asm volatile(                                                                  \
      "{\n.reg .pred p;\nsetp.ne.b32 p, %69, 0;\n"                          \
      "wgmma.mma_async.sync.aligned.m64n128k16.f32." TYPES " {"                      \
      "%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15,"  \
      "%16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31," \
      "%32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47," \
      "%48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63" \
      "}, {%64, %65, %66, %67}, %68, p, 1, 1, " TRANS_B ";\n}\n"   \
      : ATTN_WGMMA_D128_OPERANDS                                                    \
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(desc_b),                 \
        "r"(static_cast<int>(accumulate)))
    ATTN_WGMMA_DISPATCH(ATTN_WGMMA_RS);
#undef ATTN_WGMMA_RS
  }
};

template <>
struct Wgmma<176> {
  // D[64 x 176] (+)= A[64 x 16] · B[16 x 176], A and B in shared memory.
  template <class T, bool kTransB>
  __device__ __forceinline__ static void SS(float (&d)[1][22][4], uint64_t desc_a,
                                            uint64_t desc_b, bool accumulate) {
#define ATTN_WGMMA_SS(TYPES, TRANS_B)                                              \
  asm volatile(                                                                  \
      "{\n.reg .pred p;\nsetp.ne.b32 p, %90, 0;\n"                          \
      "wgmma.mma_async.sync.aligned.m64n176k16.f32." TYPES " {"                      \
      "%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15,"  \
      "%16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31," \
      "%32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47," \
      "%48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63," \
      "%64, %65, %66, %67, %68, %69, %70, %71, %72, %73, %74, %75, %76, %77, %78, %79," \
      "%80, %81, %82, %83, %84, %85, %86, %87"                                 \
      "}, %88, %89, p, 1, 1, 0, " TRANS_B ";\n}\n"                          \
      : ATTN_WGMMA_D176_OPERANDS                                                    \
      : "l"(desc_a), "l"(desc_b), "r"(static_cast<int>(accumulate)))
    ATTN_WGMMA_DISPATCH(ATTN_WGMMA_SS);
#undef ATTN_WGMMA_SS
  }

  // D[64 x 176] (+)= A[64 x 16] · B[16 x 176], A in registers (the m16n8k16
  // A fragment of each warp's 16 rows), B in shared memory.
  template <class T, bool kTransB>
  __device__ __forceinline__ static void RS(float (&d)[1][22][4], const uint32_t (&a)[4],
                                            uint64_t desc_b, bool accumulate) {
#define ATTN_WGMMA_RS(TYPES, TRANS_B)                                              \
  asm volatile(                                                                  \
      "{\n.reg .pred p;\nsetp.ne.b32 p, %93, 0;\n"                          \
      "wgmma.mma_async.sync.aligned.m64n176k16.f32." TYPES " {"                      \
      "%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15,"  \
      "%16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31," \
      "%32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47," \
      "%48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63," \
      "%64, %65, %66, %67, %68, %69, %70, %71, %72, %73, %74, %75, %76, %77, %78, %79," \
      "%80, %81, %82, %83, %84, %85, %86, %87"                                 \
      "}, {%88, %89, %90, %91}, %92, p, 1, 1, " TRANS_B ";\n}\n"   \
      : ATTN_WGMMA_D176_OPERANDS                                                    \
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(desc_b),                 \
        "r"(static_cast<int>(accumulate)))
    ATTN_WGMMA_DISPATCH(ATTN_WGMMA_RS);
#undef ATTN_WGMMA_RS
  }
};

#undef ATTN_WGMMA_DISPATCH
#undef ATTN_WGMMA_D64_OPERANDS
#undef ATTN_WGMMA_D128_OPERANDS
#undef ATTN_WGMMA_D176_OPERANDS

}  // namespace attn::fa2

#endif  // ATTN_KERNELS_SRC_CUDA_DEVICE_WGMMA_CUH_
