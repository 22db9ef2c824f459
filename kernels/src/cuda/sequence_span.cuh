// SequenceSpan: where one CTA's sequence lies in Q, K, V and O (dense
// batches, varlen, K/V caches), shared by the families' kernels.
#ifndef ATTN_KERNELS_SRC_CUDA_SEQUENCE_SPAN_CUH_
#define ATTN_KERNELS_SRC_CUDA_SEQUENCE_SPAN_CUH_

#include <cstdint>

#include "fwd_params.h"

namespace attn::fa2 {

// One CTA's sequence: where its tokens start and how many there are.
struct SequenceSpan {
  int64_t q_offset;  // elements from the tensor's start to the sequence's first token
  int64_t k_offset;
  int64_t v_offset;
  int64_t o_offset;
  int seqlen_q;
  int seqlen_k;
  int q_start;  // first packed query token (varlen LSE index), else 0

  // kCache: the launch may carry a K/V cache (FwdParams::cache_seqlens).
  template <bool kCache>
  __device__ __forceinline__ static SequenceSpan Of(const FwdParams& p, int b) {
    SequenceSpan s;
    if (p.cu_seqlens_q != nullptr) {
      const int q0 = p.cu_seqlens_q[b];
      s.seqlen_q = p.cu_seqlens_q[b + 1] - q0;
      s.q_start = q0;
      s.q_offset = q0 * p.q_row_stride;
      s.o_offset = q0 * p.o_row_stride;
      if (!kCache || p.cu_seqlens_k != nullptr) {  // a cache's keys are not packed
        const int k0 = p.cu_seqlens_k[b];
        s.seqlen_k = p.cu_seqlens_k[b + 1] - k0;
        s.k_offset = k0 * p.kv_row_stride;
        s.v_offset = k0 * p.kv_row_stride;
      }
    } else {
      s.seqlen_q = p.seqlen_q;
      s.seqlen_k = p.seqlen_k;
      s.q_start = 0;
      s.q_offset = b * p.q_batch_stride;
      s.o_offset = b * p.o_batch_stride;
      s.k_offset = b * p.k_batch_stride;
      s.v_offset = b * p.v_batch_stride;
    }
    if constexpr (kCache) {
      if (p.cache_seqlens != nullptr) {
        // Cached keys plus the appended ones, clamped to the capacity.
        const int keys = p.cache_seqlens[b] + (p.k_new != nullptr ? s.seqlen_q : 0);
        s.seqlen_k = min(max(keys, 0), p.seqlen_k);
        const int64_t seq = p.block_table != nullptr ? 0 : b;  // paged: per block
        s.k_offset = seq * p.k_batch_stride;
        s.v_offset = seq * p.v_batch_stride;
      }
    }
    return s;
  }
};

}  // namespace attn::fa2

#endif  // ATTN_KERNELS_SRC_CUDA_SEQUENCE_SPAN_CUH_
