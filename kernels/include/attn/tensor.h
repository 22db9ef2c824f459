// attn/tensor.h
//
// Dense [batch, seq_len, num_heads, head_dim] tensor shapes and views (BSHD,
// the layout of the wire format, .npy files and PyTorch's (B, S, H, D)
// tensors); views never own memory. The kernels' call type, with per-tensor
// shapes and strides, is attn/problem.h.
#ifndef ATTN_TENSOR_H_
#define ATTN_TENSOR_H_

#include <array>
#include <cstdint>
#include <string>

#include "attn/dtype.h"

namespace attn {

struct Shape {
  int64_t batch = 0;
  int64_t seq_len = 0;
  int64_t num_heads = 0;
  int64_t head_dim = 0;

  int64_t NumElements() const { return batch * seq_len * num_heads * head_dim; }
  // Elements between consecutive sequence positions (one token's heads).
  int64_t RowStride() const { return num_heads * head_dim; }
  // "[B, S, H, D]" for messages.
  std::string ToString() const;

  // The four dimensions with their field names ("batch", "seq_len",
  // "num_heads", "head_dim"), for validation messages that name the field.
  struct NamedDim {
    const char* name;
    int64_t value;
  };
  std::array<NamedDim, 4> NamedDims() const {
    return {{{"batch", batch}, {"seq_len", seq_len}, {"num_heads", num_heads},
             {"head_dim", head_dim}}};
  }
  bool operator==(const Shape& o) const {
    return batch == o.batch && seq_len == o.seq_len && num_heads == o.num_heads &&
           head_dim == o.head_dim;
  }
  bool operator!=(const Shape& o) const { return !(*this == o); }
};

struct ConstTensorView {
  const void* data = nullptr;
  DType dtype = DType::kBFloat16;
  Shape shape;
};

struct TensorView {
  void* data = nullptr;
  DType dtype = DType::kBFloat16;
  Shape shape;
  operator ConstTensorView() const { return {data, dtype, shape}; }
};

}  // namespace attn

#endif  // ATTN_TENSOR_H_
