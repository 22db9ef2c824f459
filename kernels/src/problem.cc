#include "attn/problem.h"

#include <algorithm>
#include <cmath>

#include "absl/strings/str_cat.h"

namespace attn {
namespace {

// Query rows × visible keys of one sequence of sq queries over sk keys.
double SequencePairs(int64_t sq, int64_t sk, int64_t window_left, int64_t window_right) {
  if (window_left < 0 && window_right < 0) return static_cast<double>(sq) * sk;
  double pairs = 0;
  for (int64_t i = 0; i < sq; ++i) {
    const int64_t diagonal = i + sk - sq;
    const int64_t lo = window_left >= 0 ? std::max<int64_t>(0, diagonal - window_left) : 0;
    const int64_t hi = window_right >= 0 ? std::min(sk - 1, diagonal + window_right) : sk - 1;
    if (hi >= lo) pairs += static_cast<double>(hi - lo + 1);
  }
  return pairs;
}

}  // namespace

AttentionProblem AttentionProblem::SelfAttention(int64_t batch, int64_t seq_len, int64_t heads,
                                                 int64_t head_dim) {
  AttentionProblem p;
  p.batch = batch;
  p.seqlen_q = seq_len;
  p.seqlen_k = seq_len;
  p.heads_q = heads;
  p.heads_kv = heads;
  p.head_dim = head_dim;
  return p;
}

float AttentionProblem::ResolvedScale() const {
  if (softmax_scale != 0.0f) return softmax_scale;
  return 1.0f / std::sqrt(static_cast<float>(head_dim));
}

double AttentionProblem::VisiblePairs(const int32_t* cu_seqlens_q_host,
                                      const int32_t* cu_seqlens_k_host) const {
  const int64_t right = EffectiveWindowRight();
  if (varlen && cu_seqlens_q_host != nullptr && cu_seqlens_k_host != nullptr) {
    double pairs = 0;
    for (int64_t b = 0; b < batch; ++b) {
      pairs += SequencePairs(cu_seqlens_q_host[b + 1] - cu_seqlens_q_host[b],
                             cu_seqlens_k_host[b + 1] - cu_seqlens_k_host[b], window_left, right);
    }
    return pairs;
  }
  return static_cast<double>(batch) * SequencePairs(seqlen_q, seqlen_k, window_left, right);
}

double AttentionProblem::Flops(const int32_t* cu_seqlens_q_host,
                               const int32_t* cu_seqlens_k_host) const {
  return 4.0 * static_cast<double>(head_dim) * static_cast<double>(heads_q) *
         VisiblePairs(cu_seqlens_q_host, cu_seqlens_k_host);
}

std::string AttentionProblem::ToString() const {
  std::string s = absl::StrCat("[B=", batch, ", Sq=", seqlen_q, ", Sk=", seqlen_k,
                               ", Hq=", heads_q, ", Hkv=", heads_kv, ", D=", head_dim);
  if (causal) absl::StrAppend(&s, ", causal");
  if (window_left >= 0 || window_right >= 0) {
    absl::StrAppend(&s, ", window=(", window_left, ",", window_right, ")");
  }
  if (varlen) {
    absl::StrAppend(&s, ", varlen total_q=", total_q);
    if (!kv_cache) absl::StrAppend(&s, " total_k=", total_k);
  }
  if (kv_cache) {
    absl::StrAppend(&s, ", kv_cache");
    if (page_size > 0) {
      absl::StrAppend(&s, " pages=", num_pages, "x", page_size, " max_pages_per_seq=",
                      max_pages_per_seq);
    }
    if (append) absl::StrAppend(&s, " append");
  }
  if (return_lse) absl::StrAppend(&s, ", lse");
  absl::StrAppend(&s, "]");
  return s;
}

int64_t SplitKvWorkspaceBytes(const AttentionProblem& problem, int num_splits) {
  if (num_splits <= 1) return 0;
  // Per split and query row (as the LSE indexes them): head_dim floats of
  // partial O and one of LSE.
  return int64_t{num_splits} * problem.QTokens() * problem.heads_q * (problem.head_dim + 1) * 4;
}

TensorStrides ContiguousStrides(int64_t seq_len, int64_t heads, int64_t head_dim) {
  TensorStrides s;
  s.head = head_dim;
  s.row = heads * head_dim;
  s.batch = seq_len * s.row;
  return s;
}

AttentionArgs AttentionArgs::Contiguous(const AttentionProblem& problem, DType dtype,
                                        const void* q, const void* k, const void* v, void* out,
                                        float* lse) {
  AttentionArgs args;
  args.problem = problem;
  args.dtype = dtype;
  args.q = q;
  args.k = k;
  args.v = v;
  args.out = out;
  args.lse = lse;
  args.q_strides = ContiguousStrides(problem.seqlen_q, problem.heads_q, problem.head_dim);
  args.out_strides = args.q_strides;
  args.k_strides = problem.Paged()
                       ? ContiguousStrides(problem.page_size, problem.heads_kv, problem.head_dim)
                       : ContiguousStrides(problem.seqlen_k, problem.heads_kv, problem.head_dim);
  args.v_strides = args.k_strides;
  args.k_new_strides = ContiguousStrides(problem.seqlen_q, problem.heads_kv, problem.head_dim);
  args.v_new_strides = args.k_new_strides;
  return args;
}

}  // namespace attn
