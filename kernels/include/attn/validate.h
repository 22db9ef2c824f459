// attn/validate.h
//
// The checks behind ValidateArgs (attn/attention.h), split so that a caller
// can apply them before it has buffers: the service checks a request's
// problem as it decodes it, and the host copy of its cu_seqlens, with the
// same rules and the same messages as the kernels. Every rule lives here and
// only here; callers do not re-implement any of them.
//
// All return INVALID_ARGUMENT with a message that names the field and the
// rule it broke, e.g. "heads_q (32) must be a multiple of heads_kv (6)".
#ifndef ATTN_VALIDATE_H_
#define ATTN_VALIDATE_H_

#include <cstdint>

#include "absl/status/status.h"
#include "attn/attention.h"
#include "attn/problem.h"

namespace attn {

// The shape rules, without pointers or strides: every dimension between 1
// and its limit (batch and heads_q at most 65535 on GPU kernels), at most
// 2^40 elements per tensor, heads_q a multiple of heads_kv, window values
// >= -1, softmax_scale finite and >= 0, varlen totals between 1 and
// INT32_MAX; then what `kernel` can do (kernel.caps: head_dims,
// seq_multiple, causal, window, gqa, seqlen_q != seqlen_k, lse, varlen).
absl::Status ValidateProblem(const AttentionProblem& problem, const KernelInfo& kernel);

// A host copy of cu_seqlens_q or cu_seqlens_k (`field` names it in
// messages): batch + 1 int32 offsets, the first 0, non-decreasing, the last
// equal to `total`, no sequence longer than `max_len` (the problem's
// seqlen_q or seqlen_k). GPU kernels cannot have their device offsets
// checked by ValidateArgs; a caller that holds the host copy checks it here.
// The CPU kernel's ValidateArgs calls it on its (host) pointers.
absl::Status ValidateCuSeqlens(const int32_t* host, int64_t batch, int64_t total,
                               int64_t max_len, const char* field);

// Host copies of a K/V cache's tables (problem.kv_cache): cache_seqlens
// [batch] each >= 0 and, with the appended tokens (seqlen_q, or per
// sequence from cu_seqlens_q with varlen), within the capacity seqlen_k;
// when paged, block_table [batch, max_pages_per_seq] with every page a
// sequence uses in [0, num_pages). Like cu_seqlens, GPU kernels cannot
// have these device tables checked by ValidateArgs; they never read or
// write outside the cache whatever the tables hold (lengths are clamped to
// the capacity, rows on a page out of range read as zeros and are not
// written), but the result of such a call is unspecified. A caller that
// holds the host copies checks them here; the CPU kernel's ValidateArgs does.
absl::Status ValidateKvCache(const AttentionProblem& problem, const int32_t* cache_seqlens,
                             const int32_t* block_table, const int32_t* cu_seqlens_q);

// args.workspace, workspace_bytes and num_splits: num_splits in
// [0, kMaxSplits]; a workspace given is 16-byte aligned with
// workspace_bytes >= 0; num_splits > 1 needs a workspace of at least
// SplitKvWorkspaceBytes(problem, num_splits) bytes.
absl::Status ValidateWorkspace(const AttentionArgs& args, const KernelInfo& kernel);

}  // namespace attn

#endif  // ATTN_VALIDATE_H_
