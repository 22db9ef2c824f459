#include "sessions/step_args.h"

#include <algorithm>
#include <memory>
#include <utility>

namespace attn::server {

int64_t StepBlockEntries(int max_steps_per_call, int64_t pool_pages) {
  return std::min<int64_t>(int64_t{max_steps_per_call} * pool_pages, int64_t{1} << 20);
}

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

RequestSpec StepSpec(const StepPlan& plan, const PoolLayout& pool, bool return_lse) {
  RequestSpec spec;
  spec.dtype = plan.geometry.dtype;
  spec.problem = StepProblem(plan, pool.num_pages, return_lse);
  spec.cu_seqlens_q = plan.cu_seqlens_q;
  auto cache = std::make_shared<PagedCache>();
  cache->pool = pool.base;
  cache->page_bytes = pool.page_bytes;
  cache->device = pool.device;
  cache->cache_seqlens = plan.cache_seqlens;
  cache->block_table = plan.block_table;
  spec.cache = std::move(cache);
  return spec;
}

}  // namespace attn::server
