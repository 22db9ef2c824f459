#include "cpu_vector_math.h"

#include <cpuid.h>
#include <immintrin.h>

#include <algorithm>
#include <cstring>
#include <limits>

#include "attn/dtype.h"

// One clone per vector width (AVX-512 with its 16-bit lanes, AVX2, baseline);
// the dynamic loader resolves each call once.
#define ATTN_VECTOR_CLONES __attribute__((target_clones("arch=x86-64-v4", "arch=x86-64-v3", "default")))

namespace attn::internal {
namespace {

constexpr float kNegInf = -std::numeric_limits<float>::infinity();

// exp(x) for x <= 0 (softmax weights), branch-free so the loops vectorise:
// 2^(x·log2 e) split into 2^n · 2^f, f in [-0.5, 0.5] by the degree-6
// Taylor polynomial of 2^f (relative error about 2e-7), 2^n built in the
// exponent bits. x below -87 (and -inf) gives 0.
inline float ExpNonPositive(float x) {
  float t = x * 1.44269504088896341f;
  t = t < -126.0f ? -127.0f : t;
  // Round to nearest by the 1.5·2^23 trick (no -ffast-math here).
  const float n = (t + 12582912.0f) - 12582912.0f;
  const float f = t - n;
  float p = 1.54035304e-4f;
  p = p * f + 1.33335581e-3f;
  p = p * f + 9.61812911e-3f;
  p = p * f + 5.55041087e-2f;
  p = p * f + 2.40226507e-1f;
  p = p * f + 6.93147181e-1f;
  p = p * f + 1.0f;
  const int32_t bits = (static_cast<int32_t>(n) + 127) << 23;
  return p * __builtin_bit_cast(float, bits);
}

}  // namespace

// The reductions below are declared `omp simd` (built with -fopenmp-simd:
// no OpenMP runtime) so the compiler may reorder them into vector lanes.
ATTN_VECTOR_CLONES float MaskedScaledMax(const float* s, float scale, int lo, int hi) {
  float max = kNegInf;
#pragma omp simd reduction(max : max)
  for (int j = lo; j <= hi; ++j) max = std::max(max, s[j] * scale);
  return max;
}

ATTN_VECTOR_CLONES float MaskedExp(const float* s, int n, float scale, float max, int lo, int hi,
                                   float* p) {
  float sum = 0.0f;
#pragma omp simd reduction(+ : sum)
  for (int j = 0; j < n; ++j) {
    const float e = (j >= lo && j <= hi) ? ExpNonPositive(s[j] * scale - max) : 0.0f;
    p[j] = e;
    sum += e;
  }
  return sum;
}

ATTN_VECTOR_CLONES void ScaleRow(float* x, int n, float factor) {
  for (int j = 0; j < n; ++j) x[j] *= factor;
}

ATTN_VECTOR_CLONES void Bf16ToFloatRow(const uint16_t* src, int n, float* dst) {
  for (int j = 0; j < n; ++j) {
    dst[j] = __builtin_bit_cast(float, static_cast<uint32_t>(src[j]) << 16);
  }
}

ATTN_VECTOR_CLONES void FloatToBf16Row(const float* src, int n, uint16_t* dst) {
  for (int j = 0; j < n; ++j) {
    const uint32_t bits = __builtin_bit_cast(uint32_t, src[j]);
    const bool nan = (bits & 0x7fffffffu) > 0x7f800000u;
    const uint32_t rounded = bits + 0x7fffu + ((bits >> 16) & 1u);
    dst[j] =
        nan ? static_cast<uint16_t>((bits >> 16) | 0x40u) : static_cast<uint16_t>(rounded >> 16);
  }
}

namespace {

__attribute__((target("avx2,f16c"))) void HalfToFloatF16c(const uint16_t* src, int n, float* dst) {
  int j = 0;
  for (; j + 8 <= n; j += 8) {
    const __m128i h = _mm_loadu_si128(reinterpret_cast<const __m128i*>(src + j));
    _mm256_storeu_ps(dst + j, _mm256_cvtph_ps(h));
  }
  for (; j < n; ++j) dst[j] = HalfBitsToFloat(src[j]);
}

__attribute__((target("avx2,f16c"))) void FloatToHalfF16c(const float* src, int n, uint16_t* dst) {
  int j = 0;
  for (; j + 8 <= n; j += 8) {
    const __m128i h = _mm256_cvtps_ph(_mm256_loadu_ps(src + j), _MM_FROUND_TO_NEAREST_INT);
    _mm_storeu_si128(reinterpret_cast<__m128i*>(dst + j), h);
  }
  for (; j < n; ++j) dst[j] = FloatToHalfBits(src[j]);
}

bool HostHasF16c() {
  // F16C by CPUID leaf 1 (ECX bit 29): clang's __builtin_cpu_supports does
  // not know "f16c"; AVX2 (which implies the OS saves YMM) by the builtin.
  static const bool has = [] {
    unsigned eax = 0, ebx = 0, ecx = 0, edx = 0;
    return __get_cpuid(1, &eax, &ebx, &ecx, &edx) && (ecx & (1u << 29)) != 0 &&
           __builtin_cpu_supports("avx2");
  }();
  return has;
}

}  // namespace

void HalfToFloatRow(const uint16_t* src, int n, float* dst) {
  if (HostHasF16c()) return HalfToFloatF16c(src, n, dst);
  for (int j = 0; j < n; ++j) dst[j] = HalfBitsToFloat(src[j]);
}

void FloatToHalfRow(const float* src, int n, uint16_t* dst) {
  if (HostHasF16c()) return FloatToHalfF16c(src, n, dst);
  for (int j = 0; j < n; ++j) dst[j] = FloatToHalfBits(src[j]);
}

}  // namespace attn::internal
