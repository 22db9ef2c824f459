// Command-line flags shared by attn_cli and attn_loadgen for what the call
// computes beyond self-attention, in FlashAttention-2's terms: K/V shape
// (kv_seq_len, kv_num_heads: GQA/MQA), causal and sliding-window masks, the
// LSE output and packed variable-length sequences.
//
//   --kv_shape=B,Skv,Hkv,D   K and V's shape (B and D as Q's); empty: Q's
//   --causal                 bottom-right aligned causal mask
//   --window=L,R             sliding window, -1 = unbounded on that side
//   --lse                    also return the log-sum-exp per query row
//   --cu_seqlens_q=0,a,b,... / --cu_seqlens_k=...   varlen token offsets
//   --seqlens_q=a,b,... [--seqlens_k=...]           the same as lengths
#ifndef ATTN_CLIENT_TOOLS_PROBLEM_FLAGS_H_
#define ATTN_CLIENT_TOOLS_PROBLEM_FLAGS_H_

#include <cstdint>
#include <optional>
#include <vector>

#include "absl/status/statusor.h"
#include "attn/client/attend_types.h"

namespace attn::tools {

struct ProblemFlagValues {
  std::optional<Shape> kv_shape;
  std::vector<int32_t> cu_seqlens_q;  // varlen: both set, or neither
  std::vector<int32_t> cu_seqlens_k;
  bool causal = false;
  int64_t window_left = -1;
  int64_t window_right = -1;
  bool lse = false;

  // Sets causal, window and return_lse.
  void ApplyTo(AttendOptions* options) const;
};

// The flags' values; INVALID_ARGUMENT naming the flag when one is malformed.
absl::StatusOr<ProblemFlagValues> ProblemFlagsFromFlags();

// "B,S,H,D" -> Shape; false unless four integers.
bool ParseShapeFlag(const std::string& text, Shape* shape);

}  // namespace attn::tools

#endif  // ATTN_CLIENT_TOOLS_PROBLEM_FLAGS_H_
