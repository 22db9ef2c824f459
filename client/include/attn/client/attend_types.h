// attn/client/attend_types.h
//
// The values of one remote attention call: its inputs (AttentionInputs), its
// per-call options (AttendOptions) and its result (AttendResult), which
// carries the output tensor together with where the time went, on the
// server (ServerTiming, from the response) and in this client (ClientTiming).
//
// Tensors are raw little-endian 16-bit elements (fp16 or bf16) in
// [batch, seq_len, num_heads, head_dim] order, contiguous: the wire layout,
// so they travel without conversion. They are held in std::string, the type
// protobuf uses for `bytes`, so outputs move out of responses without a copy.
#ifndef ATTN_CLIENT_ATTEND_TYPES_H_
#define ATTN_CLIENT_ATTEND_TYPES_H_

#include <cstdint>
#include <optional>
#include <string>

#include "absl/status/status.h"
#include "absl/time/time.h"
#include "attn/dtype.h"
#include "attn/tensor.h"

namespace attn {

// Q, K and V of one call. All three have `shape` and `dtype`; each holds
// exactly shape.NumElements() * 2 bytes.
struct AttentionInputs {
  DType dtype = DType::kBFloat16;
  Shape shape;
  std::string q;
  std::string k;
  std::string v;

  // Bytes of one tensor: shape.NumElements() * 2.
  int64_t TensorBytes() const;
  // INVALID_ARGUMENT naming the field when a dimension is < 1 or a tensor's
  // size does not match the shape.
  absl::Status Validate() const;
};

// Inputs drawn from N(0, 1) with a seeded generator and rounded to `dtype`
// (round to nearest even). The same seed gives the same tensors.
AttentionInputs MakeRandomInputs(const Shape& shape, DType dtype, uint64_t seed);

// How Attend moves the tensors.
enum class Transport {
  kAuto,    // unary when the request fits the stream threshold, else streamed
  kUnary,   // always one Attend message each way
  kStream,  // always the chunked AttendStream RPC
};

struct AttendOptions {
  // Kernel to run (ListKernels). Empty: the server's default.
  std::string kernel;
  // Multiplies Q·Kᵀ before the softmax. Unset: 1/sqrt(head_dim).
  std::optional<float> softmax_scale;
  // Echoed by the server and logged there. Empty: the server assigns one.
  std::string request_id;
  // Deadline of this call. Zero: ClientOptions::rpc_timeout.
  absl::Duration timeout = absl::ZeroDuration();
  Transport transport = Transport::kAuto;
};

// The server's breakdown of one request (proto Timing), in nanoseconds. The
// parts are disjoint; total_ns also covers what they do not (OtherNs).
struct ServerTiming {
  int64_t receive_ns = 0;  // AttendStream: header to last input chunk (0 for unary)
  int64_t decode_ns = 0;   // validating the request and building the job
  int64_t queue_ns = 0;   // waiting for a worker
  int64_t h2d_ns = 0;     // staging and host-to-device copy (0 on the CPU backend)
  int64_t kernel_ns = 0;  // the attention kernel
  int64_t d2h_ns = 0;     // device-to-host copy (0 on the CPU backend)
  int64_t total_ns = 0;   // arrival to response ready

  // total_ns minus the named parts (never negative).
  int64_t OtherNs() const;
};

// This client's side of one call, in nanoseconds.
struct ClientTiming {
  // Building the request message(s): header encoding and, when streaming,
  // copying the tensors into chunk messages. Unary requests reference the
  // caller's tensors without copying them, so this stays small.
  int64_t marshal_ns = 0;
  // Parsing the response and assembling the output tensor.
  int64_t unmarshal_ns = 0;
  // From the Attend call to the result being ready (everything).
  int64_t round_trip_ns = 0;
  // Streaming only: from the call's start until the last request chunk was
  // handed to the transport (0 for unary calls, where gRPC does not report
  // when the request left).
  int64_t upload_ns = 0;
  // True when the call went over AttendStream.
  bool streamed = false;

  // round_trip_ns minus client marshal/unmarshal and the server's total: the
  // network, gRPC's own (de)serialisation and waiting outside the server's
  // clock. Never negative.
  int64_t NetworkNs(const ServerTiming& server) const;
};

struct AttendResult {
  std::string request_id;
  DType dtype = DType::kBFloat16;
  Shape shape;
  std::string out;  // the output, same layout and size as q
  ServerTiming server;
  ClientTiming client;
  std::string kernel;          // kernel that ran
  std::string backend;         // "cuda" or "cpu"
  std::string device;          // e.g. "NVIDIA H200 (cuda:0)"
  double kernel_tflops = 0.0;  // as reported by the server
};

// FLOPs of one non-causal attention call: 4·B·H·S²·D (two matmuls of
// 2·S²·D each per head), the convention FlashAttention benchmarks use.
double AttentionFlops(const Shape& shape);

}  // namespace attn

#endif  // ATTN_CLIENT_ATTEND_TYPES_H_
