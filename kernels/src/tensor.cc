#include "attn/tensor.h"

#include "absl/strings/str_format.h"

namespace attn {

std::string Shape::ToString() const {
  return absl::StrFormat("[%d, %d, %d, %d]", batch, seq_len, num_heads, head_dim);
}

}  // namespace attn
