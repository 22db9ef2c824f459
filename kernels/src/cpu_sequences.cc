#include "cpu_sequences.h"

#include <cstring>

#include "attn/dtype.h"

namespace attn::internal {

Sequence SequenceOf(const AttentionArgs& args, int64_t b) {
  const AttentionProblem& p = args.problem;
  Sequence s;
  if (p.varlen) {
    s.q_token0 = args.cu_seqlens_q[b];
    s.sq = args.cu_seqlens_q[b + 1] - s.q_token0;
  } else {
    s.sq = p.seqlen_q;
  }
  if (p.kv_cache) {  // the cached tokens and the appended ones
    s.sk = args.cache_seqlens[b] + (p.append ? s.sq : 0);
  } else if (p.varlen) {
    s.k_token0 = args.cu_seqlens_k[b];
    s.sk = args.cu_seqlens_k[b + 1] - s.k_token0;
  } else {
    s.sk = p.seqlen_k;
  }
  return s;
}

int64_t KeyOffset(const AttentionArgs& args, const TensorStrides& s, int64_t b, int64_t token,
                  int64_t h) {
  const AttentionProblem& p = args.problem;
  if (p.Paged()) {
    const int64_t page = args.block_table[b * p.max_pages_per_seq + token / p.page_size];
    return page * s.batch + (token % p.page_size) * s.row + h * s.head;
  }
  return Offset(s, p.VarlenKeys(), b, token, h);
}

void AppendToCache(const AttentionArgs& args) {
  const AttentionProblem& p = args.problem;
  const size_t row_bytes = p.head_dim * DTypeSize(args.dtype);
  const size_t elem = DTypeSize(args.dtype);
  // The cache is written through k / v (attn/problem.h: writable with append).
  char* k = static_cast<char*>(const_cast<void*>(args.k));
  char* v = static_cast<char*>(const_cast<void*>(args.v));
  const char* k_new = static_cast<const char*>(args.k_new);
  const char* v_new = static_cast<const char*>(args.v_new);
  for (int64_t b = 0; b < p.batch; ++b) {
    const Sequence seq = SequenceOf(args, b);
    for (int64_t i = 0; i < seq.sq; ++i) {
      const int64_t token = args.cache_seqlens[b] + i;
      for (int64_t h = 0; h < p.heads_kv; ++h) {
        const int64_t from = seq.q_token0 + i;
        std::memcpy(k + KeyOffset(args, args.k_strides, b, token, h) * elem,
                    k_new + Offset(args.k_new_strides, p.varlen, b, from, h) * elem, row_bytes);
        std::memcpy(v + KeyOffset(args, args.v_strides, b, token, h) * elem,
                    v_new + Offset(args.v_new_strides, p.varlen, b, from, h) * elem, row_bytes);
      }
    }
  }
}

}  // namespace attn::internal
