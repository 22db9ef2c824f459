#include "server_limits.h"

#include <algorithm>
#include <cstdint>
#include <string>

#include "absl/strings/str_cat.h"

namespace attn::internal {
namespace {

absl::Status CheckTensor(const char* name, const std::string& shape_text, int64_t tokens,
                         int64_t heads, int64_t head_dim, int64_t limit) {
  int64_t elements = 0;
  const bool overflow = __builtin_mul_overflow(tokens, heads, &elements) ||
                        __builtin_mul_overflow(elements, head_dim, &elements);
  if (!overflow && elements <= limit) return absl::OkStatus();
  return absl::ResourceExhaustedError(absl::StrCat(
      name, " needs ", overflow ? std::string("more than 2^63") : absl::StrCat(elements),
      " elements (shape ", shape_text, "); the server's limit is ", limit,
      " (ServerInfo limits.max_tokens_per_request, attn_server --max_tokens_per_request)"));
}

}  // namespace

absl::Status CheckTokenLimit(const AttentionInputs& inputs,
                             const attnserve::v1::ServerLimits& limits) {
  const int64_t limit = limits.max_tokens_per_request();
  if (limit <= 0) return absl::OkStatus();
  const Shape& s = inputs.shape;
  const bool varlen = inputs.varlen();
  const std::string q_shape =
      varlen ? absl::StrCat("[", inputs.TokensQ(), ", ", s.num_heads, ", ", s.head_dim, "]")
             : s.ToString();
  const std::string kv_shape =
      varlen ? absl::StrCat("[", inputs.TokensKv(), ", ", inputs.NumHeadsKv(), ", ", s.head_dim,
                            "]")
             : Shape{s.batch, inputs.SeqLenKv(), inputs.NumHeadsKv(), s.head_dim}.ToString();
  if (absl::Status q = CheckTensor("q", q_shape, std::max(inputs.TokensQ(), s.batch), s.num_heads,
                                   s.head_dim, limit);
      !q.ok()) {
    return q;
  }
  return CheckTensor("k", kv_shape, std::max(inputs.TokensKv(), s.batch), inputs.NumHeadsKv(),
                     s.head_dim, limit);
}

}  // namespace attn::internal
