// One AttendStream call, driven by gRPC's callback API: writes the header and
// Q, K, V in chunks (one write in flight at a time, so memory stays at one
// chunk; K and V have their own sizes), reads the response header, the
// output's chunks and then (with return_lse) the LSE's chunks concurrently,
// and reassembles both.
#ifndef ATTN_CLIENT_SRC_STREAM_CALL_H_
#define ATTN_CLIENT_SRC_STREAM_CALL_H_

#include <cstdint>
#include <memory>

#include "absl/functional/any_invocable.h"
#include "attn/client/attend_types.h"
#include "attnserve/v1/attention.grpc.pb.h"
#include "grpcpp/client_context.h"
#include "grpcpp/support/client_callback.h"
#include "grpcpp/support/status.h"

namespace attn::internal {

// Receives the call's final status and, when it is OK, the complete result
// (client timings included). A malformed response stream is reported as
// INTERNAL.
using StreamDone = absl::AnyInvocable<void(const grpc::Status&, AttendResult) &&>;

class AttendStreamCall final
    : public grpc::ClientBidiReactor<attnserve::v1::AttendStreamRequest,
                                     attnserve::v1::AttendStreamResponse> {
 public:
  // Starts the call on `stub` with the prepared `context` (deadline,
  // metadata). `start_ns` (MonotonicNanos) is when the caller's Attend
  // began. With `out_destination` (QBytes() bytes, alive until `done`), the
  // output's chunks are written there and the result's `out` stays empty.
  // The call deletes itself after `done` returns.
  static void Start(attnserve::v1::Attention::Stub* stub,
                    std::unique_ptr<grpc::ClientContext> context,
                    attnserve::v1::AttendRequest header,
                    std::shared_ptr<const AttentionInputs> inputs, int64_t chunk_bytes,
                    int64_t start_ns, char* out_destination, StreamDone done);

  void OnWriteDone(bool ok) override;
  void OnWritesDoneDone(bool ok) override;
  void OnReadDone(bool ok) override;
  void OnDone(const grpc::Status& status) override;

 private:
  AttendStreamCall(std::unique_ptr<grpc::ClientContext> context,
                   std::shared_ptr<const AttentionInputs> inputs, int64_t chunk_bytes,
                   int64_t start_ns, bool return_lse, char* out_destination, StreamDone done);

  // Writes the next chunk of Q, K or V, or half-closes after the last one.
  void WriteNext();
  // Consumes one response message; a non-OK status ends the call.
  grpc::Status Consume();
  // Appends one TENSOR_OUT or TENSOR_LSE chunk in order.
  grpc::Status Append(const attnserve::v1::TensorChunk& chunk);

  const std::unique_ptr<grpc::ClientContext> context_;
  const std::shared_ptr<const AttentionInputs> inputs_;
  const int64_t chunk_bytes_;
  const int64_t start_ns_;
  StreamDone done_;

  // Writer side (OnWriteDone runs one at a time).
  attnserve::v1::AttendStreamRequest write_msg_;
  int tensor_index_ = 0;  // 0: q, 1: k, 2: v, 3: all written
  int64_t tensor_offset_ = 0;
  int64_t marshal_ns_ = 0;
  int64_t upload_ns_ = 0;

  // Reader side (OnReadDone runs one at a time).
  attnserve::v1::AttendStreamResponse read_msg_;
  AttendResult result_;
  bool have_header_ = false;
  const bool return_lse_;
  char* const out_destination_;  // the caller's, or null: into result_.out
  int64_t received_ = 0;      // output bytes
  std::string lse_bytes_;     // float32 LSE, assembled from TENSOR_LSE chunks
  int64_t lse_received_ = 0;
  int64_t unmarshal_ns_ = 0;
  grpc::Status read_error_;
};

}  // namespace attn::internal

#endif  // ATTN_CLIENT_SRC_STREAM_CALL_H_
