// Conversions between the client's types and attnserve.v1 messages, and the
// zero-copy encoding of unary Attend requests.
//
// A generated stub would copy Q, K and V twice per call (into the request
// message, then into gRPC's send buffer). EncodeAttendRequest instead writes
// the small header fields with protobuf and appends each tensor as a
// length-delimited field whose payload slice points at the caller's memory:
// the message parses exactly as AttendRequest::SerializeAsString's (and, for
// a request without fields numbered above v's, has the same bytes), and the
// tensors are read in place by the transport.
#ifndef ATTN_CLIENT_SRC_WIRE_CODEC_H_
#define ATTN_CLIENT_SRC_WIRE_CODEC_H_

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "absl/types/span.h"
#include "attn/client/attend_types.h"
#include "attnserve/v1/attention.pb.h"
#include "grpcpp/support/byte_buffer.h"
#include "grpcpp/support/slice.h"

namespace attn::internal {

attnserve::v1::DType ToProto(DType dtype);
// INVALID_ARGUMENT for DTYPE_UNSPECIFIED or unknown values.
absl::Status FromProto(attnserve::v1::DType proto, DType* dtype);
attnserve::v1::TensorShape ToProto(const Shape& shape);
Shape FromProto(const attnserve::v1::TensorShape& proto);
ServerTiming FromProto(const attnserve::v1::Timing& proto);

// Every AttendRequest field except q, k and v. Fields of the newer features
// (kv_seq_len, kv_num_heads, causal, window, return_lse, cu_seqlens) are set
// only when the inputs or options use them, so a self-attention request
// encodes to the same bytes as before they existed.
attnserve::v1::AttendRequest MakeRequestHeader(const AttentionInputs& inputs,
                                               const AttendOptions& options);

// Exact serialized size of `header` with a q of `q_bytes` and a k and v of
// `kv_bytes` each.
int64_t EncodedRequestBytes(const attnserve::v1::AttendRequest& header, int64_t q_bytes,
                            int64_t kv_bytes);

// `header` followed by fields q, k, v of `inputs`. The tensor slices hold a
// reference to `inputs` until gRPC releases them.
grpc::ByteBuffer EncodeAttendRequest(const attnserve::v1::AttendRequest& header,
                                     std::shared_ptr<const AttentionInputs> inputs);

// `request` as bytes for the raw AttendSessions call: its small fields
// serialized, then q, k and v as slices of its own tensor strings (moved
// out, held until gRPC releases the slices), so the tensors are not copied
// into a send buffer. Parses as request.SerializeAsString() does.
grpc::ByteBuffer EncodeStepRequest(attnserve::v1::AttendSessionsRequest request);

// A received AttendResponse whose output stays in the slices it arrived in
// (attn/sliced_message.h): every other field parsed into `header`, O a list
// of views of `slices`. TakeResponse then copies O once, into the caller's
// out_destination or the result; parsing the whole message copied it into
// a string first, a second pass over 16 MiB for B=1, S=4096, H=16, d=128.
struct SlicedResponse {
  std::vector<grpc::Slice> slices;
  attnserve::v1::AttendResponse header;  // `out` empty
  std::vector<absl::string_view> out;
  int64_t OutBytes() const;
};

// Reads `bytes` into `response`; INTERNAL when it is not an AttendResponse.
absl::Status ReadResponse(const grpc::ByteBuffer& bytes, SlicedResponse* response);

// Moves `response` into `result` (everything but timings measured by the
// client); O goes to options.out_destination instead when that is set.
// INTERNAL when the response does not match the request: wrong dtype,
// shape, output size, or LSE size (LseElements() floats with `return_lse`,
// none without; neither when written to a region).
absl::Status TakeResponse(SlicedResponse& response, const AttentionInputs& inputs,
                          const AttendOptions& options, AttendResult* result);
// TakeResponse but for copying O: every check (O's size included), the
// metadata and the LSE; O stays in `response.out` for the caller to place
// (a split call's shard scatters it into the whole call's output).
absl::Status TakeResponseButOutput(SlicedResponse& response, const AttentionInputs& inputs,
                                   const AttendOptions& options, AttendResult* result);
// The pieces' bytes, in order, to `to`.
void CopyPieces(absl::Span<const absl::string_view> pieces, char* to);

// Same for the header message of a streamed response; the output and LSE
// arrive separately in chunks.
absl::Status TakeResponseHeader(attnserve::v1::AttendResponse& header,
                                const AttentionInputs& inputs, AttendResult* result);

// float32 little-endian bytes (AttendResponse.lse) to floats; INTERNAL when
// there are not `elements` of them.
absl::Status DecodeLse(const std::string& bytes, int64_t elements, std::vector<float>* lse);

}  // namespace attn::internal

#endif  // ATTN_CLIENT_SRC_WIRE_CODEC_H_
