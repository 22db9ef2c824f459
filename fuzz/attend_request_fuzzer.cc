// fuzz/attend_request_fuzzer.cc
//
// attn_server's unary request paths on arbitrary bytes: SlicedRequestReader
// (the server's own parser, which leaves q, k and v in the received slices)
// for AttendRequest and AttendSessionsRequest, and the codec's checks
// (DecodeAttendRequest, tensor_codec.h).
//
// Input: byte 0 picks the slice size (byte + 1), the rest is the body, cut
// into slices of that size as gRPC might have received it.
//
// Asserted, for every input (a failure aborts; libFuzzer reports a crash):
//   1. the reader accepts exactly the bodies protobuf's generated parser
//      accepts (read as either message);
//   2. when it does, it yields the same fields: its header equals the
//      generated message without q, k and v, and q, k, v have the same bytes;
//   3. (AttendRequest) decoding the reader's result and the generated message gives the same
//      status (code and message) and, when OK, the same request;
//   4. a refusal is one of the codes the codec documents, with a message.
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "attnserve/v1/attention.pb.h"
#include "frontend/sliced_request_reader.h"
#include "frontend/tensor_codec.h"
#include "fuzz_check.h"
#include "google/protobuf/util/field_comparator.h"
#include "google/protobuf/util/message_differencer.h"
#include "grpcpp/support/byte_buffer.h"
#include "grpcpp/support/slice.h"
#include "server_fuzz_support.h"
#include "core/server_options.h"

namespace {

namespace pb = ::attnserve::v1;
using attn::server::RequestSpec;
using attn::server::SlicedRequestReader;

void CheckSameSpec(const RequestSpec& a, const RequestSpec& b) {
  FUZZ_CHECK(a.request_id == b.request_id, "request_id");
  FUZZ_CHECK(a.dtype == b.dtype, "dtype");
  FUZZ_CHECK(a.problem.ToString() == b.problem.ToString(), "%s vs %s",
             a.problem.ToString().c_str(), b.problem.ToString().c_str());
  FUZZ_CHECK(a.problem.softmax_scale == b.problem.softmax_scale, "softmax_scale");
  FUZZ_CHECK(a.problem.total_q == b.problem.total_q && a.problem.total_k == b.problem.total_k,
             "varlen totals");
  FUZZ_CHECK(a.cu_seqlens_q == b.cu_seqlens_q && a.cu_seqlens_k == b.cu_seqlens_k, "cu_seqlens");
  FUZZ_CHECK(a.kernel == b.kernel, "kernel");
}

// Asserts 1 and 2 for `Request` (a message with bytes q, k, v); whether it
// parsed, with `reader` and `generated` filled.
template <typename Request>
bool CheckSameAsGenerated(const grpc::ByteBuffer& buffer, const std::string& body, size_t slice,
                          SlicedRequestReader<Request>* reader, Request* generated) {
  // 1. The same verdict.
  const bool read = reader->Parse(buffer);
  const bool parsed = generated->ParseFromString(body);
  FUZZ_CHECK(read == parsed, "%s: reader %d, generated parser %d (%zu bytes in slices of %zu)",
             std::string(Request::descriptor()->name()).c_str(), read, parsed, body.size(), slice);
  if (!read) return false;

  // 2. The same fields.
  FUZZ_CHECK(attn::fuzz::Bytes(reader->q()) == generated->q(), "q");
  FUZZ_CHECK(attn::fuzz::Bytes(reader->k()) == generated->k(), "k");
  FUZZ_CHECK(attn::fuzz::Bytes(reader->v()) == generated->v(), "v");
  Request without_tensors = *generated;
  without_tensors.clear_q();
  without_tensors.clear_k();
  without_tensors.clear_v();
  // A NaN float (softmax_scale) read by both is the same field, though it
  // compares unequal to itself.
  google::protobuf::util::DefaultFieldComparator comparator;
  comparator.set_treat_nan_as_equal(true);
  google::protobuf::util::MessageDifferencer differencer;
  differencer.set_field_comparator(&comparator);
  FUZZ_CHECK(differencer.Compare(reader->header(), without_tensors), "header:\n%s\nvs\n%s",
             reader->header().DebugString().c_str(), without_tensors.DebugString().c_str());
  return true;
}

}  // namespace

extern "C" int LLVMFuzzerInitialize(int* /*argc*/, char*** /*argv*/) {
  attn::fuzz::SilenceProtobufLogs();
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  const size_t slice = static_cast<size_t>(data[0]) + 1;
  const std::string body(reinterpret_cast<const char*>(data + 1), size - 1);

  std::vector<grpc::Slice> slices;
  for (size_t at = 0; at < body.size(); at += slice) {
    slices.emplace_back(body.data() + at, std::min(slice, body.size() - at));
  }
  const grpc::ByteBuffer buffer(slices.data(), slices.size());

  // 1 and 2, for the step call's message (its own reader is the same
  // template: this checks its field numbers and instantiation).
  {
    SlicedRequestReader<pb::AttendSessionsRequest> step_reader;
    pb::AttendSessionsRequest step_generated;
    CheckSameAsGenerated(buffer, body, slice, &step_reader, &step_generated);
  }
  SlicedRequestReader<pb::AttendRequest> reader;
  pb::AttendRequest generated;
  if (!CheckSameAsGenerated(buffer, body, slice, &reader, &generated)) return 0;

  // 3. The same decoding. Small limits keep sizes (and messages) realistic
  // for both paths alike.
  attn::server::Limits limits;
  limits.max_tokens_per_request = int64_t{1} << 20;
  const absl::StatusOr<RequestSpec> from_reader = attn::server::DecodeAttendRequest(
      reader.header(), {reader.q().size(), reader.k().size(), reader.v().size()}, limits,
      attn::fuzz::CpuCatalog());
  const absl::StatusOr<RequestSpec> from_generated =
      attn::server::DecodeAttendRequest(generated, limits, attn::fuzz::CpuCatalog());
  FUZZ_CHECK(from_reader.status() == from_generated.status(), "%s vs %s",
             from_reader.status().ToString().c_str(), from_generated.status().ToString().c_str());
  if (from_reader.ok()) {
    CheckSameSpec(*from_reader, *from_generated);
    return 0;
  }

  // 4. Refusals.
  attn::fuzz::CheckDecodeRefusal(from_reader.status());
  return 0;
}
