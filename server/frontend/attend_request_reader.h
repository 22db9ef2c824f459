// server/frontend/attend_request_reader.h
//
// Reads a serialized attnserve.v1.AttendRequest from the grpc::ByteBuffer
// it arrived in without copying its tensors: q, k and v become TensorSource
// views of the buffer's slices (which this object holds a reference to), and
// every other field is copied as it came and parsed by the generated parser
// into `header` (an AttendRequest whose q, k and v are empty). The executor
// then copies each tensor once, from the slices straight into its pinned
// staging memory.
//
// Before, the generated parser copied each tensor into a std::string and the
// executor copied it again into staging: two passes over 48 MiB for a
// B=1, S=4096, H=16, D=128 request instead of one.
//
// The split is attn/sliced_message.h's, with protobuf's rules: fields in
// any order, the last occurrence of a tensor wins, unknown fields are
// skipped. A body that is not a valid AttendRequest gives false, as the
// generated parser would: the reader accepts exactly what it accepts
// (fuzz/attend_request_fuzzer.cc asserts it).
#ifndef ATTN_SERVER_ATTEND_REQUEST_READER_H_
#define ATTN_SERVER_ATTEND_REQUEST_READER_H_

#include <vector>

#include "attnserve/v1/attention.pb.h"
#include "grpcpp/support/byte_buffer.h"
#include "grpcpp/support/slice.h"
#include "core/tensor_place.h"

namespace attn::server {

class AttendRequestReader {
 public:
  // Parses `bytes`; false when it is not a valid AttendRequest. The views
  // stay valid for this object's lifetime (it holds the slices), whatever
  // happens to `bytes` afterwards.
  bool Parse(const grpc::ByteBuffer& bytes);

  const attnserve::v1::AttendRequest& header() const { return header_; }
  const TensorSource& q() const { return q_; }
  const TensorSource& k() const { return k_; }
  const TensorSource& v() const { return v_; }

  // Drops the views and the slices (the request's memory goes back to gRPC).
  void Release();

 private:
  std::vector<grpc::Slice> slices_;
  attnserve::v1::AttendRequest header_;
  TensorSource q_, k_, v_;
};

}  // namespace attn::server

#endif  // ATTN_SERVER_ATTEND_REQUEST_READER_H_
