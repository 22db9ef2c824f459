// Splitting one unary Attend call into shards that travel on different
// connections in parallel (ClientOptions::split_calls_above_bytes), and
// putting their outputs back together.
//
// Attention is independent per (batch, head): a shard is the same call on a
// range of the batch (every head) or a range of the KV heads with their
// query heads (every batch entry; with GQA a query head stays with the KV
// head it reads). Tensors are [batch, seq, heads, head_dim] and the LSE
// [batch, num_heads, seq_len], so a batch shard's tensors are contiguous
// ranges of the caller's (sent without a copy) while a head shard's are a
// strided gather, and its output a strided scatter. (Sending a head
// shard's rows in place, one gRPC slice each, was tried: ~10^5 small slices
// a call cost gRPC more than the copy saves.) Every kernel accepts a
// smaller batch or head count (attn::ValidateProblem bounds them only
// below by 1), and the kernels compute each (batch, head) on its own, so
// the reassembled output is byte-identical to the unsplit call's.
#ifndef ATTN_CLIENT_SRC_CALL_SPLIT_H_
#define ATTN_CLIENT_SRC_CALL_SPLIT_H_

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/string_view.h"
#include "absl/types/span.h"
#include "attn/client/attend_types.h"

namespace attn::internal {

// Batch entries [batch_begin, batch_end) and KV heads [kv_head_begin,
// kv_head_end) (with query heads kv_head_begin * group .. kv_head_end *
// group, group = num_heads / kv_num_heads) of a call.
struct Shard {
  int64_t batch_begin = 0, batch_end = 0;
  int64_t kv_head_begin = 0, kv_head_end = 0;
};

// True when `inputs` under `options` may be split at all: inline tensors
// (no TensorRef in or out), no varlen, and the caller allows it.
bool SplittableCall(const AttentionInputs& inputs, const AttendOptions& options);

// The most shards `inputs` can be split into: its batch or its KV heads,
// whichever is larger.
int64_t MaxShards(const AttentionInputs& inputs);

// `inputs` split into min(shards, what is possible) near-equal contiguous
// ranges: along the batch when that gives at least as many shards as the
// KV heads do (no copy), else along the KV heads. One shard covering
// everything when shards < 2.
std::vector<Shard> PlanShards(const AttentionInputs& inputs, int64_t shards);

// The inputs of one shard of `whole`: for a batch shard, views of whole's
// tensors (borrowed_*; the result keeps `whole` alive), for a head shard,
// the gathered tensors.
std::shared_ptr<const AttentionInputs> ShardInputs(
    const std::shared_ptr<const AttentionInputs>& whole, const Shard& shard);

// Copies a shard's output (its ShardInputs' Q layout) into its place in
// `out`, the whole call's output (whole.QBytes() bytes), and likewise its
// LSE into `lse` (whole.LseElements() floats). Shards write disjoint
// bytes, so different shards may scatter concurrently.
// (The shard's output comes as the pieces it arrived in, copied once.)
void ScatterOutput(const AttentionInputs& whole, const Shard& shard,
                   absl::Span<const absl::string_view> shard_out, char* out);
void ScatterLse(const AttentionInputs& whole, const Shard& shard,
                const std::vector<float>& shard_lse, std::vector<float>* lse);

}  // namespace attn::internal

#endif  // ATTN_CLIENT_SRC_CALL_SPLIT_H_
