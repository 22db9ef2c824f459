// server/sessions/step_args.h
//
// A step call (StepPlan) as the kernel library's problem and arguments:
// varlen queries (each step's new tokens), appended into a paged K/V cache
// (flash_attn_with_kvcache's block_table, cache_seqlens, k/v), causal to
// the bottom right over each session's whole cache.
//
// The pool's memory is `num_pages` pages of `page_bytes`: K rows in the
// first half of each page, V rows in the second, so one block table serves
// both and a page's K and V lie together. Every executor builds its launch
// from these two functions; only the pointers differ (host or device).
#ifndef ATTN_SERVER_SESSIONS_STEP_ARGS_H_
#define ATTN_SERVER_SESSIONS_STEP_ARGS_H_

#include <cstdint>

#include "attn/problem.h"
#include "sessions/session_registry.h"

namespace attn::server {

struct PoolLayout {
  char* base = nullptr;  // page 0 (host or device memory)
  int64_t num_pages = 0;
  int64_t page_bytes = 0;
};

AttentionProblem StepProblem(const StepPlan& plan, int64_t num_pages, bool return_lse);

// `q`, `k_new`, `v_new`, `out`, `lse` packed over the steps; the plan's
// cu_seqlens_q, cache_seqlens and block_table given where the kernel reads
// them (host vectors for the CPU kernel; a GPU executor's device copies).
AttentionArgs StepArgs(const StepPlan& plan, const PoolLayout& pool, bool return_lse,
                       const void* q, const void* k_new, const void* v_new, void* out,
                       float* lse, const int32_t* cu_seqlens_q, const int32_t* cache_seqlens,
                       const int32_t* block_table);

}  // namespace attn::server

#endif  // ATTN_SERVER_SESSIONS_STEP_ARGS_H_
