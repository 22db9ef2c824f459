// K/V cache problems for the kernel tests (attn/problem.h's kv_cache): the
// host tensors of one case — the cache (dense or a page pool with a
// shuffled block table), the queries and new tokens — and, independent of
// any kernel's cache logic, the same attention as an ordinary varlen
// problem over each sequence's keys gathered out of the cache after the
// append. A kernel's output on the cache problem must match a reference's on
// the gathered one, and the cache after the call must be the expected one.
//
// Cache rows no sequence has (past each cache length, unused pages) hold
// NaN, and block-table entries past the pages a sequence uses hold indices
// out of range: a kernel reading or writing anything it should not fails.
#ifndef ATTN_TESTS_KERNELS_KV_CACHE_CASE_H_
#define ATTN_TESTS_KERNELS_KV_CACHE_CASE_H_

#include <cstdint>
#include <string>
#include <vector>

#include "attn/problem.h"

namespace attn::testing {

// What to build.
struct KvCacheSpec {
  std::string name;
  // heads_q, heads_kv, head_dim, causal, window, scale and return_lse are
  // taken from here; the lengths come from the fields below.
  AttentionProblem base;
  std::vector<int32_t> cache_lens;  // cached tokens per sequence before the call
  std::vector<int32_t> new_lens;    // query (and, with append, new) tokens per sequence
  bool varlen = false;  // packed queries; else every new_lens entry must be equal
  bool append = false;
  int64_t page_size = 0;      // 0: a dense cache
  int64_t capacity = 0;       // tokens per sequence (paged: rounded up to whole pages)
  int64_t spare_pages = 3;    // pool pages no sequence uses
  bool share_prefix = false;  // sequences b > 0 read sequence 0's full pages (shared prompt)
};

struct KvCacheCase {
  KvCacheSpec spec;
  AttentionProblem problem;  // the kv_cache problem
  uint64_t seed = 0;
  // The kernel's inputs, 16-bit bits. q and k_new / v_new are packed
  // [QTokens, heads, head_dim] (the dense layout when not varlen); the
  // cache is dense [batch, capacity, heads_kv, head_dim] or the pools.
  std::vector<uint16_t> q, k_cache, v_cache, k_new, v_new;
  std::vector<int32_t> cache_seqlens, block_table, cu_seqlens_q;
  // The cache after the call (the append written; equal to the input
  // without append).
  std::vector<uint16_t> k_cache_after, v_cache_after;
  // The same attention as a varlen problem without a cache: q as above,
  // keys and values gathered per sequence from the cache after the call.
  AttentionProblem gathered;
  std::vector<uint16_t> gathered_k, gathered_v;
  std::vector<int32_t> gathered_cu_q, gathered_cu_k;

  std::string Describe(DType dtype) const;
  // The gathered problem's LSE ([heads_q, total_q]) in the cache problem's
  // LSE layout ([batch, heads_q, seqlen_q] when not varlen).
  std::vector<double> LseInProblemLayout(const std::vector<double>& gathered_lse) const;
};

// Builds the case with inputs drawn from N(0, 1) in `dtype`.
KvCacheCase MakeKvCacheCase(const KvCacheSpec& spec, DType dtype, uint64_t seed);

// A spec in one line, for the tests' tables.
KvCacheSpec KvSpec(std::string name, AttentionProblem base, std::vector<int32_t> cache_lens,
                   std::vector<int32_t> new_lens, int64_t page_size, int64_t capacity,
                   bool append, bool varlen = false, bool share_prefix = false);

// A spec's base problem: the heads, head_dim and mask (lengths come from the spec).
AttentionProblem KvHeads(int64_t heads_q, int64_t heads_kv, int64_t head_dim, bool causal = true);

}  // namespace attn::testing

#endif  // ATTN_TESTS_KERNELS_KV_CACHE_CASE_H_
