// One wrapper per PTX instruction the kernels use. Kernel code calls these,
// never inline asm. Fragment layouts follow the PTX ISA, "Warp-level matrix
// fragment mma.m16n8k16" and "ldmatrix"; with groupID = lane / 4 and
// tig = lane % 4 (thread in group):
//   A (16x16, row-major):  a0 (groupID,   2tig..+1)  a1 (groupID+8, 2tig..+1)
//                          a2 (groupID,   2tig+8..)  a3 (groupID+8, 2tig+8..)
//   B (16x8, "col"):       b0 (k=2tig..+1, n=groupID) b1 (k=2tig+8..+9, n=groupID)
//   C/D (16x8, fp32):      c0,c1 (groupID, 2tig..+1) c2,c3 (groupID+8, 2tig..+1)
#ifndef ATTN_KERNELS_SRC_CUDA_DEVICE_PTX_CUH_
#define ATTN_KERNELS_SRC_CUDA_DEVICE_PTX_CUH_

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cstdint>

namespace attn::fa2 {

// Shared-memory address (state space .shared) of a generic pointer.
__device__ __forceinline__ uint32_t SmemAddress(const void* ptr) {
  return static_cast<uint32_t>(__cvta_generic_to_shared(ptr));
}

// cp.async.cg: 16 bytes global -> shared, bypassing L1, with a 128-byte L2
// prefetch hint (PTX ISA 9.7.9.25.3.1).
__device__ __forceinline__ void CpAsync16(uint32_t smem_addr, const void* gmem) {
  asm volatile("cp.async.cg.shared.global.L2::128B [%0], [%1], 16;\n" ::"r"(smem_addr),
               "l"(gmem));
}

// cp.async.cg with zero fill: copies 16 bytes when `valid`, else reads
// nothing and writes 16 zero bytes (src-size 0).
__device__ __forceinline__ void CpAsync16ZeroFill(uint32_t smem_addr, const void* gmem,
                                                  bool valid) {
  const int src_bytes = valid ? 16 : 0;
  asm volatile("cp.async.cg.shared.global.L2::128B [%0], [%1], 16, %2;\n" ::"r"(smem_addr),
               "l"(gmem), "r"(src_bytes));
}

__device__ __forceinline__ void CpAsyncCommit() { asm volatile("cp.async.commit_group;\n" ::); }

// Waits until at most kPending committed groups are still in flight.
template <int kPending>
__device__ __forceinline__ void CpAsyncWait() {
  asm volatile("cp.async.wait_group %0;\n" ::"n"(kPending));
}

// ldmatrix .x4: lanes 8i..8i+7 give the row addresses of 8x8 matrix i;
// r[i] receives this lane's pair of matrix i: row lane/4, columns 2(lane%4)..+1.
__device__ __forceinline__ void LdMatrixX4(uint32_t (&r)[4], uint32_t smem_addr) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0, %1, %2, %3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(smem_addr));
}

// ldmatrix .x4 .trans: as LdMatrixX4 but each 8x8 matrix transposed, so r[i]
// holds rows 2(lane%4)..+1 of column lane/4 of matrix i.
__device__ __forceinline__ void LdMatrixX4Trans(uint32_t (&r)[4], uint32_t smem_addr) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0, %1, %2, %3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(smem_addr));
}

// d += a · b on the tensor cores: mma.sync.m16n8k16, fp32 accumulators,
// 16-bit operands of type T (__half or __nv_bfloat16).
template <class T>
__device__ __forceinline__ void Mma16816(float (&d)[4], const uint32_t (&a)[4], uint32_t b0,
                                         uint32_t b1);

template <>
__device__ __forceinline__ void Mma16816<__nv_bfloat16>(float (&d)[4], const uint32_t (&a)[4],
                                                        uint32_t b0, uint32_t b1) {
  asm volatile(
      "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 "
      "{%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, {%0, %1, %2, %3};\n"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}

template <>
__device__ __forceinline__ void Mma16816<__half>(float (&d)[4], const uint32_t (&a)[4],
                                                 uint32_t b0, uint32_t b1) {
  asm volatile(
      "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 "
      "{%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, {%0, %1, %2, %3};\n"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}

// Two floats rounded to nearest into one 32-bit register of two T, `lo` in
// the low half (the element with the smaller column index).
template <class T>
__device__ __forceinline__ uint32_t PackFloat2(float lo, float hi);

template <>
__device__ __forceinline__ uint32_t PackFloat2<__nv_bfloat16>(float lo, float hi) {
  __nv_bfloat162 pair = __floats2bfloat162_rn(lo, hi);
  return *reinterpret_cast<uint32_t*>(&pair);
}

template <>
__device__ __forceinline__ uint32_t PackFloat2<__half>(float lo, float hi) {
  __half2 pair = __floats2half2_rn(lo, hi);
  return *reinterpret_cast<uint32_t*>(&pair);
}

// One float rounded to nearest into a T.
template <class T>
__device__ __forceinline__ T FromFloat(float x);

template <>
__device__ __forceinline__ __nv_bfloat16 FromFloat<__nv_bfloat16>(float x) {
  return __float2bfloat16_rn(x);
}

template <>
__device__ __forceinline__ __half FromFloat<__half>(float x) {
  return __float2half_rn(x);
}

// 2^x with the special-function unit (ex2.approx.ftz.f32, MUFU.EX2).
__device__ __forceinline__ float Exp2Approx(float x) {
  float y;
  asm("ex2.approx.ftz.f32 %0, %1;\n" : "=f"(y) : "f"(x));
  return y;
}

// 16-byte shared-memory load and global store, for the output epilogue.
__device__ __forceinline__ uint4 LdShared128(uint32_t smem_addr) {
  uint4 v;
  asm volatile("ld.shared.v4.u32 {%0, %1, %2, %3}, [%4];\n"
               : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w)
               : "r"(smem_addr));
  return v;
}

__device__ __forceinline__ void StShared32(uint32_t smem_addr, uint32_t value) {
  asm volatile("st.shared.u32 [%0], %1;\n" ::"r"(smem_addr), "r"(value));
}

// The same store without allocating in L1 (write-once output; ladder step 14).
__device__ __forceinline__ void StGlobal128NoAllocate(void* gmem, uint4 v) {
  asm volatile("st.global.L1::no_allocate.v4.u32 [%0], {%1, %2, %3, %4};\n" ::"l"(gmem),
               "r"(v.x), "r"(v.y), "r"(v.z), "r"(v.w)
               : "memory");
}

__device__ __forceinline__ void StGlobal128(void* gmem, uint4 v) {
  asm volatile("st.global.v4.u32 [%0], {%1, %2, %3, %4};\n" ::"l"(gmem), "r"(v.x), "r"(v.y),
               "r"(v.z), "r"(v.w)
               : "memory");
}

// Programmatic dependent launch (PTX ISA "griddepcontrol"; sm_90+, a
// no-op below): a kernel launched after this one with
// cudaLaunchAttributeProgrammaticStreamSerialization may start once every
// CTA of this grid has called GridLaunchDependents (or exited), and
// GridDependencyWait blocks the dependent until this grid has completed and
// its memory is visible. Without the attribute the wait returns at once.
__device__ __forceinline__ void GridLaunchDependents() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("griddepcontrol.launch_dependents;\n" ::: "memory");
#endif
}

__device__ __forceinline__ void GridDependencyWait() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("griddepcontrol.wait;\n" ::: "memory");
#endif
}

}  // namespace attn::fa2

#endif  // ATTN_KERNELS_SRC_CUDA_DEVICE_PTX_CUH_
