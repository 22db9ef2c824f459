// How the CPU kernels walk a problem (attn/problem.h): each sequence's
// tokens, the keys a query row sees, element offsets into dense, packed and
// paged tensors, and the append of new K/V rows into a cache. Shared by the
// reference kernel (cpu_reference.cc) and the fast one (cpu_flash.cc), so
// both read a problem the same way.
#ifndef ATTN_KERNELS_SRC_CPU_SEQUENCES_H_
#define ATTN_KERNELS_SRC_CPU_SEQUENCES_H_

#include <algorithm>
#include <cstdint>

#include "attn/problem.h"

namespace attn::internal {

// The keys [lo, hi] query row i of a sequence of sq queries over sk keys may
// see (hi < lo: none; either end may lie outside [0, sk) before clamping),
// FA2's mask aligned to the bottom right.
struct KeyRange {
  int64_t lo, hi;
};
inline KeyRange VisibleKeys(int64_t i, int64_t sq, int64_t sk, int64_t window_left,
                            int64_t window_right) {
  const int64_t diagonal = i + sk - sq;
  KeyRange r{0, sk - 1};
  if (window_left >= 0) r.lo = std::max<int64_t>(0, diagonal - window_left);
  if (window_right >= 0) r.hi = std::min(sk - 1, diagonal + window_right);
  return r;
}

// One sequence of the batch: where its tokens start and how many there are.
struct Sequence {
  int64_t q_token0 = 0, k_token0 = 0;  // varlen: first packed token; else 0
  int64_t sq = 0, sk = 0;
};
Sequence SequenceOf(const AttentionArgs& args, int64_t b);

// Element offset of token `token` (packed index with varlen), head `h`.
inline int64_t Offset(const TensorStrides& s, bool varlen, int64_t b, int64_t token, int64_t h) {
  return (varlen ? 0 : b * s.batch) + token * s.row + h * s.head;
}

// Element offset of key token `token` of sequence b (packed index without
// a cache), head `h`, in K or V (strides `s`): dense, packed or paged.
int64_t KeyOffset(const AttentionArgs& args, const TensorStrides& s, int64_t b, int64_t token,
                  int64_t h);

// Element offset of query row `token` (packed with varlen) of sequence b,
// head h, in the LSE's layout (attn/problem.h).
inline int64_t LseIndex(const AttentionProblem& p, int64_t b, int64_t token, int64_t h) {
  return p.varlen ? h * p.total_q + token : (b * p.heads_q + h) * p.seqlen_q + token;
}

// Writes the new K/V rows of every sequence into its cache (append).
void AppendToCache(const AttentionArgs& args);

}  // namespace attn::internal

#endif  // ATTN_KERNELS_SRC_CPU_SEQUENCES_H_
