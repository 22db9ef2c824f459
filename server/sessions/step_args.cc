#include "sessions/step_args.h"

#include <algorithm>

namespace attn::server {

AttentionProblem StepProblem(const StepPlan& plan, int64_t num_pages, bool return_lse) {
  const SessionGeometry& g = plan.geometry;
  AttentionProblem p;
  p.batch = static_cast<int64_t>(plan.cache_seqlens.size());
  int64_t longest = 0;
  for (size_t i = 0; i + 1 < plan.cu_seqlens_q.size(); ++i) {
    longest = std::max<int64_t>(longest, plan.cu_seqlens_q[i + 1] - plan.cu_seqlens_q[i]);
  }
  p.seqlen_q = longest;
  p.heads_q = g.heads_q;
  p.heads_kv = g.heads_kv;
  p.head_dim = g.head_dim;
  p.causal = true;
  p.window_left = g.window_left;
  p.softmax_scale = g.softmax_scale;
  p.return_lse = return_lse;
  p.varlen = true;
  p.total_q = plan.total_tokens;
  p.kv_cache = true;
  p.append = true;
  p.page_size = plan.page_tokens;
  p.num_pages = num_pages;
  p.max_pages_per_seq = plan.max_pages_per_seq;
  p.seqlen_k = plan.max_pages_per_seq * plan.page_tokens;
  return p;
}

AttentionArgs StepArgs(const StepPlan& plan, const PoolLayout& pool, bool return_lse,
                       const void* q, const void* k_new, const void* v_new, void* out,
                       float* lse, const int32_t* cu_seqlens_q, const int32_t* cache_seqlens,
                       const int32_t* block_table) {
  const AttentionProblem problem = StepProblem(plan, pool.num_pages, return_lse);
  const int64_t half = pool.page_bytes / 2;
  AttentionArgs args = AttentionArgs::Contiguous(problem, plan.geometry.dtype, q, pool.base,
                                                 pool.base + half, out, lse);
  // A page's K half and V half: rows of heads_kv x head_dim, pages a whole
  // page apart.
  const TensorStrides pages = {pool.page_bytes / static_cast<int64_t>(DTypeSize(plan.geometry.dtype)),
                               problem.heads_kv * problem.head_dim, problem.head_dim};
  args.k_strides = args.v_strides = pages;
  args.k_new = k_new;
  args.v_new = v_new;
  args.cu_seqlens_q = cu_seqlens_q;
  args.cache_seqlens = cache_seqlens;
  args.block_table = block_table;
  return args;
}

}  // namespace attn::server
