// server/sessions/step_args.h
//
// A step call (StepPlan) as what the executors compute: varlen queries
// (each step's new tokens) appended into a paged K/V cache
// (flash_attn_with_kvcache's block_table, cache_seqlens, k/v), causal to
// the bottom right over each session's whole cache. RequestSpec::Args
// (core/job.h) turns it into the kernel's arguments.
#ifndef ATTN_SERVER_SESSIONS_STEP_ARGS_H_
#define ATTN_SERVER_SESSIONS_STEP_ARGS_H_

#include <cstdint>

#include "attn/problem.h"
#include "core/job.h"
#include "sessions/session_memory.h"
#include "sessions/session_registry.h"

namespace attn::server {

// Entries of one call's block table at most (SessionLimits::
// max_step_block_entries): every session of a call may hold the whole
// pool, but the table stays within 4 MiB, the staging each CUDA stream
// sets aside for it.
int64_t StepBlockEntries(int max_steps_per_call, int64_t pool_pages);

AttentionProblem StepProblem(const StepPlan& plan, int64_t num_pages, bool return_lse);

// The spec of the step: its problem, cu_seqlens_q and cache (kernel and
// request id left to the caller).
RequestSpec StepSpec(const StepPlan& plan, const PoolLayout& pool, bool return_lse);

}  // namespace attn::server

#endif  // ATTN_SERVER_SESSIONS_STEP_ARGS_H_
