// server/frontend/sliced_request_reader.h
//
// Reads a serialized request with bulk tensors q, k and v (an
// attnserve.v1.AttendRequest, or an AttendSessionsRequest) from the
// grpc::ByteBuffer it arrived in without copying its tensors: q, k and v
// become TensorSource views of the buffer's slices (which this object holds a
// reference to), and every other field is copied as it came and parsed by the
// generated parser into `header` (a message whose q, k and v are empty). The
// executor then copies each tensor once, from the slices straight into its
// pinned staging memory, or DMAs it from the pinned heap where gRPC read it.
//
// Before, the generated parser copied each tensor into a std::string and the
// executor copied it again into staging: two passes over 48 MiB for a
// B=1, S=4096, H=16, D=128 request instead of one.
//
// The split is attn/sliced_message.h's, with protobuf's rules: fields in
// any order, the last occurrence of a tensor wins, unknown fields are
// skipped. A body that is not a valid message gives false, as the generated
// parser would: the reader accepts exactly what it accepts
// (fuzz/attend_request_fuzzer.cc asserts it for both messages).
#ifndef ATTN_SERVER_SLICED_REQUEST_READER_H_
#define ATTN_SERVER_SLICED_REQUEST_READER_H_

#include <vector>

#include "attnserve/v1/attention.pb.h"
#include "grpcpp/support/byte_buffer.h"
#include "grpcpp/support/slice.h"
#include "core/tensor_place.h"

namespace attn::server {

// `Request`: a message with bytes fields q, k and v (instantiated for the
// two below, in the .cc).
template <typename Request>
class SlicedRequestReader {
 public:
  // Parses `bytes`; false when it is not a valid Request. The views stay
  // valid for this object's lifetime (it holds the slices), whatever happens
  // to `bytes` afterwards.
  bool Parse(const grpc::ByteBuffer& bytes);

  const Request& header() const { return header_; }
  const TensorSource& q() const { return q_; }
  const TensorSource& k() const { return k_; }
  const TensorSource& v() const { return v_; }

  // Drops the views and the slices (the request's memory goes back to gRPC).
  void Release();

 private:
  std::vector<grpc::Slice> slices_;
  Request header_;
  TensorSource q_, k_, v_;
};

using AttendRequestReader = SlicedRequestReader<attnserve::v1::AttendRequest>;
using StepRequestReader = SlicedRequestReader<attnserve::v1::AttendSessionsRequest>;

}  // namespace attn::server

#endif  // ATTN_SERVER_SLICED_REQUEST_READER_H_
