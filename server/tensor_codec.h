// server/tensor_codec.h
//
// The front end's translation between attnserve.v1 messages and RequestSpec:
// every check a request gets before it may queue, and the response fields
// that describe a finished job. Pure functions of their inputs; no I/O, no
// gRPC server types, no CUDA.
//
// Errors name the field and the limit:
//   INVALID_ARGUMENT   "dtype is DTYPE_UNSPECIFIED; set DTYPE_FLOAT16 or ..."
//                      "shape.batch is 0; it must be between 1 and 2147483648"
//                      "q has 1000 bytes; shape [1, 4, 2, 64] in bf16 needs 1024"
//                      "shape.head_dim is 64; kernel 'k07_autotuned' supports only ..."
//   RESOURCE_EXHAUSTED "request needs 4194304 tokens; this server's limit is 1048576
//                       (--max_tokens_per_request)"
//   NOT_FOUND          unknown kernel name
//   FAILED_PRECONDITION a kernel of the other backend
#ifndef ATTN_SERVER_TENSOR_CODEC_H_
#define ATTN_SERVER_TENSOR_CODEC_H_

#include <cstdint>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "attnserve/v1/attention.pb.h"
#include "job.h"
#include "kernel_catalog.h"
#include "server_options.h"

namespace attn::server {

inline constexpr size_t kMaxRequestIdBytes = 128;
inline constexpr size_t kMaxKernelNameBytes = 128;
// Largest single dimension (keeps every byte offset in int64).
inline constexpr int64_t kMaxDimension = int64_t{1} << 31;

// Checks and converts everything of `request` except the tensor bytes:
// request_id, dtype, shape and its size against `limits`, softmax_scale,
// and the kernel (resolved through `catalog`). request_id is copied as is
// (possibly empty).
absl::StatusOr<RequestSpec> DecodeRequestHeader(const attnserve::v1::AttendRequest& request,
                                                const Limits& limits, const KernelCatalog& catalog);

// INVALID_ARGUMENT unless tensor `name` ("q", "k", "v") has exactly the
// bytes `spec` needs.
absl::Status CheckTensorBytes(absl::string_view name, int64_t bytes, const RequestSpec& spec);

// DecodeRequestHeader, then the byte counts of q, k and v.
absl::StatusOr<RequestSpec> DecodeAttendRequest(const attnserve::v1::AttendRequest& request,
                                                const Limits& limits, const KernelCatalog& catalog);

attnserve::v1::DType ToProto(DType dtype);
void ToProto(const Shape& shape, attnserve::v1::TensorShape* proto);
void ToProto(const PhaseTimes& times, attnserve::v1::Timing* proto);

// 4*B*H*S*S*D / kernel time, in TFLOP/s; 0 when kernel_ns is 0.
double KernelTflops(const RequestSpec& spec, int64_t kernel_ns);

// Every field of `response` except `out`: what ran, where, and how long.
void EncodeResponseHeader(const RequestSpec& spec, const PhaseTimes& times,
                          absl::string_view backend, absl::string_view device,
                          attnserve::v1::AttendResponse* response);

}  // namespace attn::server

#endif  // ATTN_SERVER_TENSOR_CODEC_H_
