// Row operations of the fast CPU kernel (cpu_flash.cc) on float rows and
// 16-bit storage: the online softmax's steps and the dtype conversions.
// Each is built for AVX-512, AVX2 and baseline x86-64 (GCC's target_clones),
// the loader picking the one the host runs, so one build runs anywhere and
// uses the widest vectors the host has.
#ifndef ATTN_KERNELS_SRC_CPU_VECTOR_MATH_H_
#define ATTN_KERNELS_SRC_CPU_VECTOR_MATH_H_

#include <cstdint>

namespace attn::internal {

// The largest s[j] · scale over j in [lo, hi] (the keys the row may see);
// -inf when the range is empty.
float MaskedScaledMax(const float* s, float scale, int lo, int hi);

// p[j] = exp(s[j] · scale - max) for j in [lo, hi], 0 for the other j in
// [0, n); returns the sum of p.
float MaskedExp(const float* s, int n, float scale, float max, int lo, int hi, float* p);

// x[j] *= factor.
void ScaleRow(float* x, int n, float factor);

// 16-bit storage <-> float. bf16 rounds to nearest even; fp16 rounds to
// nearest even with overflow to inf (F16C where the host has it).
void Bf16ToFloatRow(const uint16_t* src, int n, float* dst);
void FloatToBf16Row(const float* src, int n, uint16_t* dst);
void HalfToFloatRow(const uint16_t* src, int n, float* dst);
void FloatToHalfRow(const float* src, int n, uint16_t* dst);

}  // namespace attn::internal

#endif  // ATTN_KERNELS_SRC_CPU_VECTOR_MATH_H_
