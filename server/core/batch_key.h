// server/core/batch_key.h
//
// Which jobs may share one kernel launch (request batching, scheduler.h):
// dense requests with the same dtype, kernel and problem except its batch.
// Q, K, V, O are [batch, seq, heads, dim] and the LSE [batch, heads, seq],
// each contiguous, so stacking such requests along batch is placing each
// one's bytes at its offset, and each request's output is its own
// consecutive slice of the stacked output. Where the tensors are (message,
// region, device) does not matter: the launch plan copies each to and from
// its place (backends/launch_plan.h).
#ifndef ATTN_SERVER_CORE_BATCH_KEY_H_
#define ATTN_SERVER_CORE_BATCH_KEY_H_

#include <algorithm>
#include <cstdint>

#include "absl/types/span.h"
#include "attn/problem.h"
#include "core/job.h"

namespace attn::server {

// True when `job` may be stacked with others: dense (not varlen), with a
// kernel and a place for O (and the LSE).
inline bool Stackable(const Job& job) {
  const RequestSpec& s = job.spec;
  return !s.problem.varlen && s.kernel != nullptr && job.out.set() &&
         (!s.problem.return_lse || job.lse.set());
}

// True when two stackable requests compute the same function of their
// inputs: every field but batch (and the varlen ones, unused when dense).
inline bool SameBatchKey(const RequestSpec& a, const RequestSpec& b) {
  const AttentionProblem& x = a.problem;
  const AttentionProblem& y = b.problem;
  return a.dtype == b.dtype && a.kernel == b.kernel && x.seqlen_q == y.seqlen_q &&
         x.seqlen_k == y.seqlen_k && x.heads_q == y.heads_q && x.heads_kv == y.heads_kv &&
         x.head_dim == y.head_dim && x.causal == y.causal && x.window_left == y.window_left &&
         x.window_right == y.window_right && x.softmax_scale == y.softmax_scale &&
         x.return_lse == y.return_lse && x.varlen == y.varlen;
}

// Bytes the request adds to the largest stacked tensor (Q and O, or K and
// V): what an executor's BatchCapacityBytes() bounds.
inline int64_t StackedBytes(const RequestSpec& spec) {
  return std::max(spec.QBytes(), spec.KVBytes());
}

// The problem of `jobs` stacked along batch (all with one batch key).
inline AttentionProblem StackedProblem(absl::Span<Job* const> jobs) {
  AttentionProblem problem = jobs.front()->spec.problem;
  problem.batch = 0;
  for (const Job* job : jobs) problem.batch += job->spec.problem.batch;
  return problem;
}

}  // namespace attn::server

#endif  // ATTN_SERVER_CORE_BATCH_KEY_H_
