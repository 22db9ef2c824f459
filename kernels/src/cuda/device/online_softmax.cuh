// The FlashAttention online softmax over one warp's accumulator fragments.
//
// Each thread holds, per m16 tile, two query rows (groupID and groupID + 8)
// and 2 columns of every n8 tile of S. Row maxima are reduced across the 4
// threads of a quad (two xor-shuffles) every KV block; row sums stay
// thread-local until the end (FA2's normalize_softmax_lse), which saves two
// shuffles per row per block.
//
// kExp2 (ladder step 6) folds the softmax scale and log2(e) into one factor
// c = scale * log2(e): p = 2^(s·c − m·c) is one FFMA and one MUFU.EX2 per
// score, the max is taken on unscaled scores (valid because c > 0), and m·c
// is computed once per row. Without it, scores are scaled first and
// exponentiated with __expf (FMUL, FADD, FMUL by log2 e, EX2).
//
// kMaskAware: scores may be −inf (masked), so a row may have seen no key yet
// (running max −inf) or at all, and such a row ends with output 0 and LSE
// −inf. Only a block that was masked can leave a row's max at −inf (a block
// without masks gives every row finite scores), so Update<kCheckInf = true>
// is called for masked blocks alone (FA2's Check_inf): the max is then
// replaced by 0 in the exponent, so 2^(−inf − 0) = 0 instead of NaN.
#ifndef ATTN_KERNELS_SRC_CUDA_DEVICE_ONLINE_SOFTMAX_CUH_
#define ATTN_KERNELS_SRC_CUDA_DEVICE_ONLINE_SOFTMAX_CUH_

#include <cmath>

#include "device/ptx.cuh"

namespace attn::fa2 {

template <int kMTiles, int kNTiles, int kDTiles, bool kExp2, bool kMaskAware = false>
struct OnlineSoftmax {
  static_assert(kExp2 || !kMaskAware, "masking is built on the exp2 form (ladder step 6)");
  float row_max[kMTiles][2];
  float row_sum[kMTiles][2];

  __device__ __forceinline__ void Init() {
#pragma unroll
    for (int mt = 0; mt < kMTiles; ++mt) {
#pragma unroll
      for (int h = 0; h < 2; ++h) {
        row_max[mt][h] = -INFINITY;
        row_sum[mt][h] = 0.0f;
      }
    }
  }

  // Turns the scores `s` of one KV block into unnormalised probabilities and
  // rescales the output accumulator `o` to the new running maxima. With
  // running max −inf (first block) the rescale factor is 2^−inf = 0.
  // kFirst (ladder step 10, the peeled first block): nothing has been
  // accumulated yet, so the max is the block's, the sum is assigned and `o`
  // (not yet zeroed) is not touched.
  template <bool kCheckInf = false, bool kFirst = false>
  __device__ __forceinline__ void Update(float (&s)[kMTiles][kNTiles][4],
                                         float (&o)[kMTiles][kDTiles][4], float scale,
                                         float scale_log2) {
    float alpha[kMTiles][2];
    Probabilities<kCheckInf, kFirst>(s, scale, scale_log2, alpha);
    if constexpr (!kFirst) Rescale(o, alpha);
  }

  // Update without touching `o`: the factors `alpha` to rescale it by
  // (Rescale) are returned instead, so a kernel can rescale once the MMAs
  // still writing `o` have completed (the hopper family's overlap).
  template <bool kCheckInf = false, bool kFirst = false>
  __device__ __forceinline__ void Probabilities(float (&s)[kMTiles][kNTiles][4], float scale,
                                                float scale_log2, float (&alpha_out)[kMTiles][2]) {
#pragma unroll
    for (int mt = 0; mt < kMTiles; ++mt) {
#pragma unroll
      for (int h = 0; h < 2; ++h) {  // h = 0: row groupID (c0, c1); 1: row groupID+8 (c2, c3)
        if constexpr (!kExp2) {
#pragma unroll
          for (int nt = 0; nt < kNTiles; ++nt) {
            s[mt][nt][2 * h] *= scale;
            s[mt][nt][2 * h + 1] *= scale;
          }
        }
        float m = kFirst ? fmaxf(s[mt][0][2 * h], s[mt][0][2 * h + 1]) : row_max[mt][h];
#pragma unroll
        for (int nt = kFirst ? 1 : 0; nt < kNTiles; ++nt) {
          m = fmaxf(m, fmaxf(s[mt][nt][2 * h], s[mt][nt][2 * h + 1]));
        }
        m = fmaxf(m, __shfl_xor_sync(0xffffffffu, m, 1));
        m = fmaxf(m, __shfl_xor_sync(0xffffffffu, m, 2));

        float alpha;
        float sum = 0.0f;
        if constexpr (kExp2) {
          float m_scaled;
          if constexpr (kFirst) {
            m_scaled = (kCheckInf && m == -INFINITY) ? 0.0f : m * scale_log2;
            alpha = 0.0f;  // unused
          } else if constexpr (kCheckInf) {
            m_scaled = m == -INFINITY ? 0.0f : m * scale_log2;
            alpha = Exp2Approx(fmaf(row_max[mt][h], scale_log2, -m_scaled));
          } else {
            alpha = Exp2Approx((row_max[mt][h] - m) * scale_log2);
            m_scaled = m * scale_log2;
          }
#pragma unroll
          for (int nt = 0; nt < kNTiles; ++nt) {
#pragma unroll
            for (int i = 0; i < 2; ++i) {
              float& x = s[mt][nt][2 * h + i];
              x = Exp2Approx(fmaf(x, scale_log2, -m_scaled));
              sum += x;
            }
          }
        } else {
          alpha = __expf(row_max[mt][h] - m);
#pragma unroll
          for (int nt = 0; nt < kNTiles; ++nt) {
#pragma unroll
            for (int i = 0; i < 2; ++i) {
              float& x = s[mt][nt][2 * h + i];
              x = __expf(x - m);
              sum += x;
            }
          }
        }
        row_max[mt][h] = m;
        row_sum[mt][h] = kFirst ? sum : row_sum[mt][h] * alpha + sum;
        alpha_out[mt][h] = alpha;
      }
    }
  }

  // Multiplies each row of `o` by its factor from Probabilities.
  __device__ __forceinline__ static void Rescale(float (&o)[kMTiles][kDTiles][4],
                                                 const float (&alpha)[kMTiles][2]) {
#pragma unroll
    for (int mt = 0; mt < kMTiles; ++mt) {
#pragma unroll
      for (int h = 0; h < 2; ++h) {
#pragma unroll
        for (int dt = 0; dt < kDTiles; ++dt) {
          o[mt][dt][2 * h] *= alpha[mt][h];
          o[mt][dt][2 * h + 1] *= alpha[mt][h];
        }
      }
    }
  }

  // Completes the row sums across the quad (row_sum then holds the row's
  // full sum in every thread of the quad) and divides `o` by them (one
  // reciprocal per row, then multiplies).
  __device__ __forceinline__ void Normalize(float (&o)[kMTiles][kDTiles][4]) {
#pragma unroll
    for (int mt = 0; mt < kMTiles; ++mt) {
#pragma unroll
      for (int h = 0; h < 2; ++h) {
        float l = row_sum[mt][h];
        l += __shfl_xor_sync(0xffffffffu, l, 1);
        l += __shfl_xor_sync(0xffffffffu, l, 2);
        row_sum[mt][h] = l;
        const float inv = (kMaskAware && l == 0.0f) ? 0.0f : 1.0f / l;
#pragma unroll
        for (int dt = 0; dt < kDTiles; ++dt) {
          o[mt][dt][2 * h] *= inv;
          o[mt][dt][2 * h + 1] *= inv;
        }
      }
    }
  }

  // log(Σ exp(scale · s)) of a row after Normalize: (m·c + log2 l) · ln 2 in
  // the exp2 form (m unscaled), m + ln l otherwise (m already scaled); −inf
  // for a row that saw no key.
  __device__ __forceinline__ float Lse(int mt, int h, float scale_log2) const {
    const float l = row_sum[mt][h];
    if (l == 0.0f) return -INFINITY;
    if constexpr (kExp2) {
      return (row_max[mt][h] * scale_log2 + __log2f(l)) * 0.6931471805599453f;
    } else {
      return row_max[mt][h] + __logf(l);
    }
  }
};

}  // namespace attn::fa2

#endif  // ATTN_KERNELS_SRC_CUDA_DEVICE_ONLINE_SOFTMAX_CUH_
