// tests/server/e2e_util.h
//
// Helpers for the end-to-end suites: requests built from the kernel tests'
// random inputs, float64 references (whole or sampled rows), checks of the
// response's timing, and AttendStream calls driven chunk by chunk.
#ifndef ATTN_TESTS_SERVER_E2E_UTIL_H_
#define ATTN_TESTS_SERVER_E2E_UTIL_H_

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "absl/time/time.h"
#include "attnserve/v1/attention.grpc.pb.h"
#include "gtest/gtest.h"
#include "test_util.h"

namespace attn::testing {

using Stub = attnserve::v1::Attention::Stub;

// An Attend request carrying `in` (request_id, dtype, shape, q, k, v): the
// fields a request had before the breadth fields existed.
attnserve::v1::AttendRequest MakeRequest(const HostInputs& in, const std::string& request_id,
                                         const std::string& kernel = "",
                                         std::optional<float> softmax_scale = std::nullopt);

// An Attend request for a whole problem: shape (kv_seq_len / kv_num_heads
// where they differ), causal, window (where >= 0), return_lse, cu_seqlens,
// softmax_scale (where not 0), and the tensors.
attnserve::v1::AttendRequest MakeRequest(const ProblemInputs& in, const std::string& request_id,
                                         const std::string& kernel = "");

// The float32 values of a response's `lse` bytes (little-endian).
std::vector<float> LseValues(const std::string& bytes);

// Checks a response's `out` (and `lse` when the problem returns it) against
// float64: every output element finite, relative L2 error below
// `tolerance`, LSE within `lse_tolerance` (rows without keys: exactly -inf).
::testing::AssertionResult ProblemOutputMatchesReference(const ProblemInputs& in,
                                                         const std::string& out,
                                                         const std::string& lse,
                                                         double tolerance,
                                                         double lse_tolerance);

// The 16-bit elements of a response's `out` bytes.
std::vector<uint16_t> ToBits(const std::string& bytes);

// Float64 attention of row `row` of head (b, h): head_dim values.
std::vector<double> ReferenceRow(const HostInputs& in, int64_t b, int64_t h, int64_t row,
                                 double scale);

// Checks `out` against float64: every element finite, relative L2 error of
// all elements (or, when `sample_rows` > 0, of that many rows spread over
// the tensor) below `tolerance`.
::testing::AssertionResult OutputMatchesReference(const HostInputs& in, double scale,
                                                  const std::string& out, double tolerance,
                                                  int sample_rows = 0);

// Timing parts non-negative, kernel and total positive, parts' sum <= total.
::testing::AssertionResult TimingConsistent(const attnserve::v1::Timing& timing);

// A client context with a deadline `timeout` from now.
std::unique_ptr<grpc::ClientContext> ContextWithDeadline(absl::Duration timeout);

// The result of an AttendStream call.
struct StreamResult {
  grpc::Status status;
  attnserve::v1::AttendResponse header;  // out and lse empty
  std::string out;                       // reassembled from the chunks
  std::string lse;                       // the same, with return_lse
  int chunks = 0;                        // output chunks
  int lse_chunks = 0;
  std::string error;  // protocol errors seen by the client ("" if none)
};

// Sends `request` through AttendStream: the header, then q, k and v (each
// at its own size) in chunks of `chunk_bytes`, interleaved (q0, k0, v0, q1,
// ...), then half-close; reads the header and the output chunks, then the
// LSE chunks (checking their order).
StreamResult AttendViaStream(Stub& stub, const attnserve::v1::AttendRequest& request,
                             int64_t chunk_bytes, absl::Duration timeout = absl::Seconds(120));

// Sends `messages` as they are, half-closes, and returns the final status.
grpc::Status SendRawStream(Stub& stub,
                           const std::vector<attnserve::v1::AttendStreamRequest>& messages);

// Stream messages: a header (request with q, k, v removed), and a chunk.
attnserve::v1::AttendStreamRequest HeaderOf(const attnserve::v1::AttendRequest& request);
attnserve::v1::AttendStreamRequest Chunk(attnserve::v1::TensorName tensor, int64_t offset,
                                         const std::string& data);

}  // namespace attn::testing

#endif  // ATTN_TESTS_SERVER_E2E_UTIL_H_
