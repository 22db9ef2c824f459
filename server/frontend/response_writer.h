// server/frontend/response_writer.h
//
// The serialized response (AttendResponse or AttendSessionsResponse) of a
// job whose output an executor lent (core/job.h OutputBuffer): the small
// fields are serialized into one slice, and `out` and `lse` are slices that
// point at the lent memory, so gRPC writes the tensor bytes to the socket
// from where the GPU copied them, with no copy into the message. The last slice to be freed destroys the
// OutputBuffer, which returns the memory to its executor.
//
// Protobuf parsers accept fields in any order, so `out` and `lse` follow
// the other fields; the bytes decode to the same message as
// SerializeToString of the whole response.
#ifndef ATTN_SERVER_RESPONSE_WRITER_H_
#define ATTN_SERVER_RESPONSE_WRITER_H_

#include <memory>

#include "attnserve/v1/attention.pb.h"
#include "grpcpp/support/byte_buffer.h"
#include "core/job.h"

namespace attn::server {

// `Response`: a message with bytes fields out and lse (instantiated for the
// two above, in the .cc). `header` must have empty out and lse.
template <typename Response>
grpc::ByteBuffer SerializeWithLentOutput(const Response& header,
                                         std::unique_ptr<OutputBuffer> output);

}  // namespace attn::server

#endif  // ATTN_SERVER_RESPONSE_WRITER_H_
