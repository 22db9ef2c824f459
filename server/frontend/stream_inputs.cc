#include "frontend/stream_inputs.h"

#include <algorithm>

#include "absl/strings/str_format.h"

namespace attn::server {
namespace {

namespace pb = ::attnserve::v1;

constexpr InputTensor kInputs[3] = {InputTensor::kQ, InputTensor::kK, InputTensor::kV};

}  // namespace

absl::Status StreamInputs::CheckHeaderHasNoTensors(const pb::AttendRequest& header) {
  const std::string* inline_tensors[3] = {&header.q(), &header.k(), &header.v()};
  for (int i = 0; i < 3; ++i) {
    if (!inline_tensors[i]->empty()) {
      return absl::InvalidArgumentError(absl::StrFormat(
          "header.%s has %d bytes; AttendStream carries tensors in chunks only (leave "
          "header.q, header.k and header.v empty)",
          InputName(kInputs[i]), inline_tensors[i]->size()));
    }
  }
  return absl::OkStatus();
}

void StreamInputs::Start(const RequestSpec& spec) {
  spec_ = &spec;
  for (std::string& input : inputs_) input.clear();
}

int64_t StreamInputs::total_received() const {
  int64_t total = 0;
  for (const std::string& input : inputs_) total += static_cast<int64_t>(input.size());
  return total;
}

absl::Status StreamInputs::Add(const pb::TensorChunk& chunk,
                               absl::FunctionRef<absl::Status(int64_t received)> reserve) {
  int index = -1;
  switch (chunk.tensor()) {
    case pb::TENSOR_Q:
      index = 0;
      break;
    case pb::TENSOR_K:
      index = 1;
      break;
    case pb::TENSOR_V:
      index = 2;
      break;
    default:
      return absl::InvalidArgumentError(absl::StrFormat(
          "chunk.tensor is %s; request chunks carry TENSOR_Q, TENSOR_K or TENSOR_V",
          pb::TensorName_IsValid(chunk.tensor()) ? pb::TensorName_Name(chunk.tensor())
                                                 : absl::StrFormat("%d", chunk.tensor())));
  }
  std::string& input = inputs_[index];
  const char* name = InputName(kInputs[index]);
  const int64_t received = static_cast<int64_t>(input.size());
  const int64_t needed = InputBytes(*spec_, kInputs[index]);
  if (chunk.offset() != received) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "chunk.offset is %d for %s; expected %d (the bytes of %s received so far): a "
        "tensor's chunks must arrive in order",
        chunk.offset(), name, received, name));
  }
  const int64_t size = static_cast<int64_t>(chunk.data().size());
  if (size > needed - received) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "chunk of %s at offset %d has %d bytes, past the end of %s: shape %s in %s needs %d", name,
        chunk.offset(), size, name, InputShapeText(*spec_, kInputs[index]),
        DTypeName(spec_->dtype), needed));
  }
  if (absl::Status reserved = reserve(total_received() + size); !reserved.ok()) return reserved;
  // Room grows with what arrives (doubling, at most the tensor's size), not
  // all at once at the header.
  if (input.capacity() < static_cast<size_t>(received + size)) {
    input.reserve(static_cast<size_t>(
        std::min(needed, std::max<int64_t>(2 * static_cast<int64_t>(input.capacity()),
                                           received + size))));
  }
  input.append(chunk.data());
  return absl::OkStatus();
}

absl::Status StreamInputs::CheckComplete() const {
  for (int i = 0; i < 3; ++i) {
    const int64_t received = static_cast<int64_t>(inputs_[i].size());
    const int64_t needed = InputBytes(*spec_, kInputs[i]);
    if (received != needed) {
      return absl::InvalidArgumentError(absl::StrFormat(
          "AttendStream ended with %d of the %d bytes of %s (shape %s in %s)", received, needed,
          InputName(kInputs[i]), InputShapeText(*spec_, kInputs[i]), DTypeName(spec_->dtype)));
    }
  }
  return absl::OkStatus();
}

std::string StreamInputs::ReceivedText() const {
  if (spec_ == nullptr) return "no header received";
  std::string text = "received";
  for (int i = 0; i < 3; ++i) {
    absl::StrAppendFormat(&text, "%s%d of %d bytes of %s", i == 0 ? " " : ", ",
                          inputs_[i].size(), InputBytes(*spec_, kInputs[i]),
                          InputName(kInputs[i]));
  }
  return text;
}

void StreamInputs::Release() {
  for (std::string& input : inputs_) std::string().swap(input);
}

}  // namespace attn::server
