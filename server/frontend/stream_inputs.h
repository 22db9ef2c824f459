// server/frontend/stream_inputs.h
//
// StreamInputs: q, k and v of one AttendStream call, assembled from its
// request chunks, with every check a chunk gets: it carries a request tensor
// (TENSOR_Q, TENSOR_K or TENSOR_V), comes in order (its offset is the bytes
// of that tensor received so far) and never runs past the tensor's size,
// which the header's RequestSpec gives. So the buffers never hold more than
// the problem needs. Pure: no gRPC, no budgets, no clock; the reactor
// (attend_stream_reactor.h) owns the call and feeds it.
//
// Errors are INVALID_ARGUMENT naming the field, the tensor and its size.
#ifndef ATTN_SERVER_STREAM_INPUTS_H_
#define ATTN_SERVER_STREAM_INPUTS_H_

#include <cstdint>
#include <string>

#include "absl/functional/function_ref.h"
#include "absl/status/status.h"
#include "attnserve/v1/attention.pb.h"
#include "frontend/tensor_codec.h"
#include "core/job.h"
#include "core/tensor_place.h"

namespace attn::server {

class StreamInputs {
 public:
  // AttendStream carries tensors in chunks only: the header's own q, k and
  // v must be empty (the error names the first that is not).
  static absl::Status CheckHeaderHasNoTensors(const attnserve::v1::AttendRequest& header);

  // Expects the inputs `spec` describes (`spec` must outlive this object,
  // or the next Start). Chunks append in order, so nothing is zero-filled;
  // memory grows with what arrives.
  void Start(const RequestSpec& spec);
  bool started() const { return spec_ != nullptr; }

  // Appends `chunk` to its tensor, or refuses it (nothing is appended).
  // A chunk that passes the checks is appended only if `reserve` (told the
  // bytes of all three tensors with it) agrees; its refusal is returned.
  // Needs Start().
  absl::Status Add(const attnserve::v1::TensorChunk& chunk,
                   absl::FunctionRef<absl::Status(int64_t received)> reserve);
  // Bytes of q, k and v received so far.
  int64_t total_received() const;

  // OK once q, k and v all have the bytes the spec needs; otherwise names
  // the first that does not. Needs Start().
  absl::Status CheckComplete() const;

  // "received 10 of 1024 bytes of q, 0 of 2048 bytes of k, ..." for the
  // messages of uploads that ended early; "no header received" before Start.
  std::string ReceivedText() const;

  int64_t received(InputTensor tensor) const {
    return static_cast<int64_t>(inputs_[static_cast<int>(tensor)].size());
  }
  // The bytes received so far; valid until Release() or the next Add().
  TensorSource View(InputTensor tensor) const {
    return TensorSource(inputs_[static_cast<int>(tensor)]);
  }

  // Frees the buffers (their memory, not only their contents).
  void Release();

 private:
  const RequestSpec* spec_ = nullptr;
  std::string inputs_[3];  // in InputTensor order
};

}  // namespace attn::server

#endif  // ATTN_SERVER_STREAM_INPUTS_H_
