// server/frontend/tensor_codec.h
//
// The front end's translation between attnserve.v1 messages and RequestSpec:
// every check a request gets before it may queue, and the response fields
// that describe a finished job. Pure functions of their inputs; no I/O, no
// gRPC server types, no CUDA.
//
// A request without the newer fields (kv_*, causal, window_*, return_lse,
// cu_seqlens_*) means non-causal self-attention, exactly as before they
// existed. The kernel library owns the problem's rules: the codec turns the
// wire's conventions (0 = same as Q, unset window = -1, varlen lengths from
// cu_seqlens) into an attn::AttentionProblem and calls the library's checks
// (attn::ValidateCuSeqlens, and attn::ValidateArgs through the catalog);
// what it checks itself is the wire's own business (missing or
// contradictory fields, byte counts) and this server's limits.
//
// Errors name the field and the limit:
//   INVALID_ARGUMENT   "dtype is DTYPE_UNSPECIFIED; set DTYPE_FLOAT16 or ..."
//                      "q has 1000 bytes; shape [1, 4, 2, 64] in bf16 needs 1024"
//                      "cu_seqlens_k is empty but cu_seqlens_q has 3 offsets; ..."
//                      the library's rules, with the wire names of the fields:
//                      "heads_q (6) must be a multiple of heads_kv (4) (heads_q is
//                       shape.num_heads; heads_kv is shape.kv_num_heads, ...)"
//   RESOURCE_EXHAUSTED "k needs 4194304 elements (shape [1, 4096, 8, 128]); this server's limit
//                       is 1048576 (--max_tokens_per_request)"
//   NOT_FOUND          unknown kernel name
//   FAILED_PRECONDITION a kernel of the other backend
#ifndef ATTN_SERVER_TENSOR_CODEC_H_
#define ATTN_SERVER_TENSOR_CODEC_H_

#include <array>
#include <cstdint>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "attnserve/v1/attention.pb.h"
#include "core/job.h"
#include "backends/kernel_catalog.h"
#include "core/server_options.h"

namespace attn::server {

inline constexpr size_t kMaxRequestIdBytes = 128;
inline constexpr size_t kMaxKernelNameBytes = 128;

// Checks and converts everything of `request` except the tensor bytes:
// request_id, dtype, the problem (shape, mask, LSE, cu_seqlens) and its size
// against `limits`, softmax_scale, and the kernel (resolved through
// `catalog`, which checks the problem against the kernel's rules).
// request_id is copied as is (possibly empty).
absl::StatusOr<RequestSpec> DecodeRequestHeader(const attnserve::v1::AttendRequest& request,
                                                const Limits& limits, const KernelCatalog& catalog);

// Input tensors of a request, in wire order.
enum class InputTensor : int { kQ = 0, kK = 1, kV = 2 };
// RESOURCE_EXHAUSTED naming `name`, its shape and --max_tokens_per_request
// when `tokens` x `heads` x head_dim elements exceed the server's
// per-tensor limit (saturating instead of overflowing).
absl::Status CheckTokenLimit(const char* name, const std::string& shape_text, int64_t tokens,
                             int64_t heads, int64_t head_dim, const Limits& limits);

const char* InputName(InputTensor tensor);  // "q", "k", "v"
// Bytes `spec` needs in `tensor`: spec.QBytes() for q, spec.KVBytes() for k, v.
int64_t InputBytes(const RequestSpec& spec, InputTensor tensor);
// The dimensions of `tensor` for messages: "[1, 4, 2, 64]" ([batch, seq,
// heads, head_dim]), or "[12, 2, 64] packed by cu_seqlens_q" with varlen.
std::string InputShapeText(const RequestSpec& spec, InputTensor tensor);

// INVALID_ARGUMENT unless `tensor` has exactly the bytes `spec` needs,
// naming the tensor, its shape and the expected size.
absl::Status CheckTensorBytes(InputTensor tensor, int64_t bytes, const RequestSpec& spec);

// DecodeRequestHeader, then the byte counts of q, k and v.
absl::StatusOr<RequestSpec> DecodeAttendRequest(const attnserve::v1::AttendRequest& request,
                                                const Limits& limits, const KernelCatalog& catalog);
// The same for a request whose tensors were read apart from its other fields
// (AttendRequestReader): `header`'s own q, k and v are ignored; `tensor_bytes`
// gives their sizes, in InputTensor order. A tensor the header references in
// a region (q_ref, ...) is not checked here but by ResolveRegionRefs.
absl::StatusOr<RequestSpec> DecodeAttendRequest(const attnserve::v1::AttendRequest& header,
                                                const std::array<int64_t, 3>& tensor_bytes,
                                                const Limits& limits, const KernelCatalog& catalog);

attnserve::v1::DType ToProto(DType dtype);
// The problem's shape as the wire describes it: the resolved lengths (varlen:
// sequences and longest lengths); kv_seq_len and kv_num_heads only where they
// differ from seq_len and num_heads (0 = the same, as in requests).
void ToProto(const AttentionProblem& problem, attnserve::v1::TensorShape* proto);
void ToProto(const PhaseTimes& times, attnserve::v1::Timing* proto);
// The wire's TensorPath of a tensor from or to there.
attnserve::v1::TensorPath ToProto(SourceKind kind);
attnserve::v1::TensorPath ToProto(DestinationKind kind);

// spec.Flops() (4*D*Hq*visible query-key pairs; 4*B*H*S*S*D for
// self-attention) / kernel time, in TFLOP/s; 0 when kernel_ns is 0.
double KernelTflops(const RequestSpec& spec, int64_t kernel_ns);

// Every field of `response` except `out` and `lse`: what ran (job.spec),
// where (job.device, its tensors' places), and how long (job.times).
void EncodeResponseHeader(const Job& job, absl::string_view backend,
                          attnserve::v1::AttendResponse* response);

}  // namespace attn::server

#endif  // ATTN_SERVER_TENSOR_CODEC_H_
