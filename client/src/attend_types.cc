#include "attn/client/attend_types.h"

#include <algorithm>
#include <random>
#include <vector>

#include "absl/strings/str_cat.h"

namespace attn {

int64_t AttentionInputs::TensorBytes() const {
  return shape.NumElements() * static_cast<int64_t>(DTypeSize(dtype));
}

absl::Status AttentionInputs::Validate() const {
  for (const Shape::NamedDim& dim : shape.NamedDims()) {
    if (dim.value < 1) {
      return absl::InvalidArgumentError(
          absl::StrCat("shape.", dim.name, " is ", dim.value, "; it must be >= 1"));
    }
  }
  const struct {
    const char* name;
    const std::string* bytes;
  } tensors[] = {{"q", &q}, {"k", &k}, {"v", &v}};
  for (const auto& tensor : tensors) {
    if (static_cast<int64_t>(tensor.bytes->size()) != TensorBytes()) {
      return absl::InvalidArgumentError(absl::StrCat(
          tensor.name, " has ", tensor.bytes->size(), " bytes; a ", DTypeName(dtype), " ",
          shape.ToString(), " tensor has ", TensorBytes()));
    }
  }
  return absl::OkStatus();
}

AttentionInputs MakeRandomInputs(const Shape& shape, DType dtype, uint64_t seed) {
  AttentionInputs inputs;
  inputs.dtype = dtype;
  inputs.shape = shape;
  const int64_t n = std::max<int64_t>(shape.NumElements(), 0);
  std::mt19937_64 rng(seed);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::vector<float> values(static_cast<size_t>(n));
  for (std::string* tensor : {&inputs.q, &inputs.k, &inputs.v}) {
    for (float& value : values) value = normal(rng);
    tensor->resize(static_cast<size_t>(n) * DTypeSize(dtype));
    FromFloat(values.data(), values.size(), dtype, tensor->data());
  }
  return inputs;
}

int64_t ServerTiming::OtherNs() const {
  return std::max<int64_t>(0, total_ns - receive_ns - decode_ns - queue_ns - h2d_ns - kernel_ns - d2h_ns);
}

int64_t ClientTiming::NetworkNs(const ServerTiming& server) const {
  return std::max<int64_t>(0, round_trip_ns - marshal_ns - unmarshal_ns - server.total_ns);
}

double AttentionFlops(const Shape& shape) {
  return 4.0 * static_cast<double>(shape.batch) * static_cast<double>(shape.num_heads) *
         static_cast<double>(shape.seq_len) * static_cast<double>(shape.seq_len) *
         static_cast<double>(shape.head_dim);
}

}  // namespace attn
