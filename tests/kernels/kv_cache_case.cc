#include "kv_cache_case.h"

#include <algorithm>
#include <numeric>
#include <random>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "attn/dtype.h"
#include "test_util.h"

namespace attn::testing {
namespace {

constexpr uint16_t kUnusedBits = 0x7ffe;  // NaN in fp16 and bf16: cache rows nobody has

void Draw(std::vector<uint16_t>& bits, int64_t at, int64_t n, DType dtype, std::mt19937_64& rng) {
  std::normal_distribution<float> normal(0.0f, 1.0f);
  for (int64_t i = 0; i < n; ++i) bits[at + i] = FloatToBits(normal(rng), dtype);
}

}  // namespace

KvCacheCase MakeKvCacheCase(const KvCacheSpec& spec, DType dtype, uint64_t seed) {
  KvCacheCase c;
  c.spec = spec;
  c.seed = seed;
  const int64_t batch = static_cast<int64_t>(spec.cache_lens.size());
  AttentionProblem& p = c.problem;
  p = spec.base;
  p.batch = batch;
  p.kv_cache = true;
  p.append = spec.append;
  p.varlen = spec.varlen;
  const int64_t total_new = std::accumulate(spec.new_lens.begin(), spec.new_lens.end(), int64_t{0});
  const int64_t max_new = *std::max_element(spec.new_lens.begin(), spec.new_lens.end());
  p.seqlen_q = spec.varlen ? std::max<int64_t>(max_new, 1) : spec.new_lens[0];
  p.total_q = spec.varlen ? total_new : 0;
  const int64_t ps = spec.page_size;
  if (ps > 0) {
    p.page_size = ps;
    p.max_pages_per_seq = (spec.capacity + ps - 1) / ps;
    p.seqlen_k = p.max_pages_per_seq * ps;
  } else {
    p.seqlen_k = spec.capacity;
  }
  const int64_t row = p.heads_kv * p.head_dim;
  std::mt19937_64 rng(seed);

  // Queries and new tokens, packed.
  c.q.resize(p.QElements());
  Draw(c.q, 0, p.QElements(), dtype, rng);
  if (spec.append) {
    c.k_new.resize(p.QTokens() * row);
    c.v_new.resize(p.QTokens() * row);
    Draw(c.k_new, 0, p.QTokens() * row, dtype, rng);
    Draw(c.v_new, 0, p.QTokens() * row, dtype, rng);
  }
  std::vector<int64_t> first_token(batch);  // of sequence b in q / k_new
  c.cu_seqlens_q.assign(1, 0);
  for (int64_t b = 0; b < batch; ++b) {
    first_token[b] = spec.varlen ? c.cu_seqlens_q.back() : b * p.seqlen_q;
    c.cu_seqlens_q.push_back(c.cu_seqlens_q.back() + spec.new_lens[b]);
  }
  if (!spec.varlen) c.cu_seqlens_q.clear();
  c.cache_seqlens = spec.cache_lens;

  // Keys each sequence has after the call.
  std::vector<int32_t> key_lens(batch);
  for (int64_t b = 0; b < batch; ++b) {
    key_lens[b] = spec.cache_lens[b] + (spec.append ? spec.new_lens[b] : 0);
  }

  // The block table: sequence b's used pages, in a shuffled order, the
  // first `shared[b]` of them sequence 0's; entries past them out of range.
  if (ps > 0) {
    std::vector<int64_t> used(batch), shared(batch, 0);
    int64_t distinct = 0;
    for (int64_t b = 0; b < batch; ++b) {
      used[b] = (key_lens[b] + ps - 1) / ps;
      if (spec.share_prefix && b > 0) {
        shared[b] = std::min(spec.cache_lens[0], spec.cache_lens[b]) / ps;
      }
      distinct += used[b] - shared[b];
    }
    p.num_pages = distinct + spec.spare_pages;
    std::vector<int32_t> order(p.num_pages);
    std::iota(order.begin(), order.end(), 0);
    std::shuffle(order.begin(), order.end(), rng);
    size_t next = 0;
    c.block_table.resize(batch * p.max_pages_per_seq);
    for (int64_t b = 0; b < batch; ++b) {
      for (int64_t i = 0; i < p.max_pages_per_seq; ++i) {
        int32_t& entry = c.block_table[b * p.max_pages_per_seq + i];
        if (i < shared[b]) {
          entry = c.block_table[i];
        } else if (i < used[b]) {
          entry = order[next++];
        } else {
          entry = static_cast<int32_t>(i % 2 ? -1 - i : p.num_pages + i);
        }
      }
    }
  }
  // Element offset of token t of sequence b in the cache.
  auto at = [&](int64_t b, int64_t t) -> int64_t {
    if (ps == 0) return (b * p.seqlen_k + t) * row;
    return (int64_t{c.block_table[b * p.max_pages_per_seq + t / ps]} * ps + t % ps) * row;
  };

  // The cache: each row a sequence has drawn once (a shared page by
  // sequence 0), the rest NaN.
  c.k_cache.assign(p.KVElements(), kUnusedBits);
  c.v_cache.assign(p.KVElements(), kUnusedBits);
  std::vector<bool> drawn(p.KVTokens(), false);
  for (int64_t b = 0; b < batch; ++b) {
    for (int64_t t = 0; t < spec.cache_lens[b]; ++t) {
      const int64_t offset = at(b, t);
      if (drawn[offset / row]) continue;
      drawn[offset / row] = true;
      Draw(c.k_cache, offset, row, dtype, rng);
      Draw(c.v_cache, offset, row, dtype, rng);
    }
  }
  c.k_cache_after = c.k_cache;
  c.v_cache_after = c.v_cache;
  if (spec.append) {
    for (int64_t b = 0; b < batch; ++b) {
      for (int64_t i = 0; i < spec.new_lens[b]; ++i) {
        const int64_t offset = at(b, spec.cache_lens[b] + i);
        std::copy_n(&c.k_new[(first_token[b] + i) * row], row, &c.k_cache_after[offset]);
        std::copy_n(&c.v_new[(first_token[b] + i) * row], row, &c.v_cache_after[offset]);
      }
    }
  }

  // The gathered problem.
  c.gathered = spec.base;
  c.gathered.kv_cache = c.gathered.append = false;
  c.gathered.page_size = c.gathered.num_pages = c.gathered.max_pages_per_seq = 0;
  SetVarlen(&c.gathered, spec.new_lens, key_lens, &c.gathered_cu_q, &c.gathered_cu_k);
  c.gathered_k.resize(c.gathered.KVElements());
  c.gathered_v.resize(c.gathered.KVElements());
  for (int64_t b = 0; b < batch; ++b) {
    for (int64_t t = 0; t < key_lens[b]; ++t) {
      const int64_t dst = (c.gathered_cu_k[b] + t) * row;
      std::copy_n(&c.k_cache_after[at(b, t)], row, &c.gathered_k[dst]);
      std::copy_n(&c.v_cache_after[at(b, t)], row, &c.gathered_v[dst]);
    }
  }
  return c;
}

std::string KvCacheCase::Describe(DType dtype) const {
  return absl::StrCat(spec.name, " ", problem.ToString(), " ", DTypeName(dtype),
                      " scale=", problem.softmax_scale, " seed=", seed, " cache_lens=",
                      absl::StrJoin(spec.cache_lens, ","), " new_lens=",
                      absl::StrJoin(spec.new_lens, ","),
                      spec.share_prefix ? " shared prefix pages" : "");
}

std::vector<double> KvCacheCase::LseInProblemLayout(const std::vector<double>& gathered_lse) const {
  if (problem.varlen) return gathered_lse;
  const int64_t heads = problem.heads_q, sq = problem.seqlen_q, total = problem.QTokens();
  std::vector<double> lse(gathered_lse.size());
  for (int64_t b = 0; b < problem.batch; ++b)
    for (int64_t h = 0; h < heads; ++h)
      for (int64_t i = 0; i < sq; ++i)
        lse[(b * heads + h) * sq + i] = gathered_lse[h * total + b * sq + i];
  return lse;
}

KvCacheSpec KvSpec(std::string name, AttentionProblem base, std::vector<int32_t> cache_lens,
                   std::vector<int32_t> new_lens, int64_t page_size, int64_t capacity,
                   bool append, bool varlen, bool share_prefix) {
  KvCacheSpec s;
  s.name = std::move(name);
  s.base = base;
  s.cache_lens = std::move(cache_lens);
  s.new_lens = std::move(new_lens);
  s.page_size = page_size;
  s.capacity = capacity;
  s.append = append;
  s.varlen = varlen;
  s.share_prefix = share_prefix;
  return s;
}

AttentionProblem KvHeads(int64_t heads_q, int64_t heads_kv, int64_t head_dim, bool causal) {
  return DenseProblem(0, 0, 0, heads_q, heads_kv, head_dim, causal);
}

}  // namespace attn::testing
