#include "attn/tensor.h"

#include <cmath>

#include "absl/strings/str_format.h"

namespace attn {

std::string Shape::ToString() const {
  return absl::StrFormat("[%d, %d, %d, %d]", batch, seq_len, num_heads, head_dim);
}

float AttentionArgs::ResolvedScale() const {
  if (softmax_scale != 0.0f) return softmax_scale;
  return 1.0f / std::sqrt(static_cast<float>(q.shape.head_dim));
}

}  // namespace attn
