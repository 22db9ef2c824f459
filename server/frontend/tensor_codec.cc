#include "frontend/tensor_codec.h"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <limits>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "attn/validate.h"
#include "core/status_util.h"

namespace attn::server {
namespace {

namespace pb = ::attnserve::v1;

// request_id and kernel end up in logs and status messages: keep them short
// and printable.
absl::Status CheckPrintable(const char* field, const std::string& text, size_t max_bytes) {
  if (text.size() > max_bytes) {
    return absl::InvalidArgumentError(
        absl::StrFormat("%s has %d bytes; the limit is %d", field, text.size(), max_bytes));
  }
  for (size_t i = 0; i < text.size(); ++i) {
    const unsigned char c = static_cast<unsigned char>(text[i]);
    if (c < 0x20 || c > 0x7e) {
      return absl::InvalidArgumentError(absl::StrFormat(
          "%s has byte 0x%02x at offset %d; only printable ASCII is allowed", field, c, i));
    }
  }
  return absl::OkStatus();
}

absl::StatusOr<DType> DecodeDType(int value) {
  switch (value) {
    case pb::DTYPE_FLOAT16:
      return DType::kFloat16;
    case pb::DTYPE_BFLOAT16:
      return DType::kBFloat16;
    case pb::DTYPE_UNSPECIFIED:
      return absl::InvalidArgumentError(
          "dtype is DTYPE_UNSPECIFIED; set DTYPE_FLOAT16 or DTYPE_BFLOAT16");
    default:
      return absl::InvalidArgumentError(absl::StrFormat(
          "dtype is %d, not a known DType; set DTYPE_FLOAT16 or DTYPE_BFLOAT16", value));
  }
}

// The longest sequence of `offsets` (0 if none is positive).
int64_t LongestSequence(const google::protobuf::RepeatedField<int32_t>& offsets) {
  int64_t longest = 0;
  for (int i = 1; i < offsets.size(); ++i) {
    longest = std::max(longest, static_cast<int64_t>(offsets[i]) - offsets[i - 1]);
  }
  return longest;
}

// The wire's conventions turned into an AttentionProblem (no rule checked
// here beyond the wire's own: missing or contradictory fields). With
// varlen, also the host copies of the offsets.
absl::Status DecodeProblem(const pb::AttendRequest& request, RequestSpec* spec) {
  if (!request.has_shape()) {
    return absl::InvalidArgumentError(
        "shape is missing; set shape.batch, shape.seq_len, shape.num_heads and shape.head_dim");
  }
  const pb::TensorShape& shape = request.shape();
  AttentionProblem& p = spec->problem;
  p.batch = shape.batch();
  p.seqlen_q = shape.seq_len();
  p.seqlen_k = shape.kv_seq_len() != 0 ? shape.kv_seq_len() : shape.seq_len();
  p.heads_q = shape.num_heads();
  p.heads_kv = shape.kv_num_heads() != 0 ? shape.kv_num_heads() : shape.num_heads();
  p.head_dim = shape.head_dim();
  p.causal = request.causal();
  p.window_left = request.has_window_left() ? request.window_left() : -1;
  p.window_right = request.has_window_right() ? request.window_right() : -1;
  p.return_lse = request.return_lse();

  const auto& cu_q = request.cu_seqlens_q();
  const auto& cu_k = request.cu_seqlens_k();
  if (cu_q.empty() && cu_k.empty()) return absl::OkStatus();
  if (cu_q.empty() || cu_k.empty()) {
    const bool q_empty = cu_q.empty();
    return absl::InvalidArgumentError(absl::StrFormat(
        "%s is empty but %s has %d offsets; varlen needs both (batch + 1 offsets each), "
        "otherwise leave both empty",
        q_empty ? "cu_seqlens_q" : "cu_seqlens_k", q_empty ? "cu_seqlens_k" : "cu_seqlens_q",
        q_empty ? cu_k.size() : cu_q.size()));
  }
  if (cu_q.size() != cu_k.size()) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "cu_seqlens_q has %d offsets and cu_seqlens_k %d; both hold batch + 1", cu_q.size(),
        cu_k.size()));
  }
  const int64_t sequences = cu_q.size() - 1;
  if (shape.batch() != 0 && shape.batch() != sequences) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "shape.batch is %d but cu_seqlens_q has %d offsets, i.e. batch %d; set shape.batch to %d "
        "or 0",
        shape.batch(), cu_q.size(), sequences, sequences));
  }
  p.varlen = true;
  p.batch = sequences;
  p.seqlen_q = shape.seq_len() != 0 ? shape.seq_len() : LongestSequence(cu_q);
  p.seqlen_k = shape.kv_seq_len() != 0 ? shape.kv_seq_len() : LongestSequence(cu_k);
  p.total_q = cu_q[cu_q.size() - 1];
  p.total_k = cu_k[cu_k.size() - 1];
  spec->cu_seqlens_q.assign(cu_q.begin(), cu_q.end());
  spec->cu_seqlens_k.assign(cu_k.begin(), cu_k.end());
  return absl::OkStatus();
}

// The kernel library names the problem's fields; the wire names them
// differently. Appends the wire names of those `status` mentions, e.g.
// "... (heads_kv is shape.kv_num_heads)".
absl::Status WithWireNames(const absl::Status& status, const AttentionProblem& problem) {
  if (status.ok()) return status;
  const bool varlen = problem.varlen;
  const std::pair<absl::string_view, std::string> names[] = {
      {"batch", varlen ? "the number of cu_seqlens_q offsets - 1" : "shape.batch"},
      {"seqlen_q",
       varlen ? "shape.seq_len, or the longest sequence of cu_seqlens_q when 0" : "shape.seq_len"},
      {"seqlen_k", varlen ? "shape.kv_seq_len, or the longest sequence of cu_seqlens_k when 0"
                          : "shape.kv_seq_len, or shape.seq_len when 0"},
      {"heads_q", "shape.num_heads"},
      {"heads_kv", "shape.kv_num_heads, or shape.num_heads when 0"},
      {"head_dim", "shape.head_dim"},
      {"total_q", "the last offset of cu_seqlens_q"},
      {"total_k", "the last offset of cu_seqlens_k"},
      {"varlen", "set by cu_seqlens_q and cu_seqlens_k"},
  };
  const absl::string_view message = status.message();
  auto is_word_char = [](char c) { return std::isalnum(static_cast<unsigned char>(c)) || c == '_'; };
  std::vector<std::string> glossary;
  for (const auto& [library, wire] : names) {
    for (size_t at = message.find(library); at != absl::string_view::npos;
         at = message.find(library, at + 1)) {
      const size_t end = at + library.size();
      const bool starts = at == 0 || (!is_word_char(message[at - 1]) && message[at - 1] != '.');
      const bool ends = end == message.size() || !is_word_char(message[end]);
      if (starts && ends) {
        glossary.push_back(absl::StrCat(library, " is ", wire));
        break;
      }
    }
  }
  if (glossary.empty()) return status;
  return absl::Status(status.code(),
                      absl::StrCat(message, " (", absl::StrJoin(glossary, "; "), ")"));
}

}  // namespace

absl::Status CheckTokenLimit(const char* name, const std::string& shape_text, int64_t tokens,
                             int64_t heads, int64_t head_dim, const Limits& limits) {
  int64_t elements = 1;
  bool overflow = false;
  for (int64_t factor : {tokens, heads, head_dim}) {
    if (factor > 0 && elements > std::numeric_limits<int64_t>::max() / factor) {
      overflow = true;
      break;
    }
    elements *= factor;
  }
  if (!overflow && elements <= limits.max_tokens_per_request) return absl::OkStatus();
  return absl::ResourceExhaustedError(absl::StrFormat(
      "%s needs %s elements (shape %s); this server's limit is %d (--max_tokens_per_request)",
      name, overflow ? std::string("more than 2^63") : absl::StrCat(elements), shape_text,
      limits.max_tokens_per_request));
}

const char* InputName(InputTensor tensor) {
  switch (tensor) {
    case InputTensor::kQ:
      return "q";
    case InputTensor::kK:
      return "k";
    case InputTensor::kV:
      return "v";
  }
  return "?";
}

int64_t InputBytes(const RequestSpec& spec, InputTensor tensor) {
  return tensor == InputTensor::kQ ? spec.QBytes() : spec.KVBytes();
}

std::string InputShapeText(const RequestSpec& spec, InputTensor tensor) {
  const AttentionProblem& p = spec.problem;
  const bool is_q = tensor == InputTensor::kQ;
  const int64_t heads = is_q ? p.heads_q : p.heads_kv;
  if (p.varlen) {
    return absl::StrFormat("[%d, %d, %d] packed by %s", is_q ? p.total_q : p.total_k, heads,
                           p.head_dim, is_q ? "cu_seqlens_q" : "cu_seqlens_k");
  }
  return absl::StrFormat("[%d, %d, %d, %d]", p.batch, is_q ? p.seqlen_q : p.seqlen_k, heads,
                         p.head_dim);
}

absl::StatusOr<RequestSpec> DecodeRequestHeader(const pb::AttendRequest& request,
                                                const Limits& limits,
                                                const KernelCatalog& catalog) {
  RequestSpec spec;
  RETURN_IF_ERROR(CheckPrintable("request_id", request.request_id(), kMaxRequestIdBytes));
  spec.request_id = request.request_id();
  ASSIGN_OR_RETURN(spec.dtype, DecodeDType(request.dtype()));
  RETURN_IF_ERROR(DecodeProblem(request, &spec));
  AttentionProblem& p = spec.problem;
  if (request.has_softmax_scale()) {
    const float scale = request.softmax_scale();
    if (!std::isfinite(scale) || scale <= 0.0f) {
      return absl::InvalidArgumentError(absl::StrFormat(
          "softmax_scale is %g; it must be finite and > 0 (or unset for 1/sqrt(head_dim))", scale));
    }
    p.softmax_scale = scale;
  }
  if (p.varlen) {
    RETURN_IF_ERROR(WithWireNames(ValidateCuSeqlens(spec.cu_seqlens_q.data(), p.batch, p.total_q,
                                                    p.seqlen_q, "cu_seqlens_q"),
                                  p));
    RETURN_IF_ERROR(WithWireNames(ValidateCuSeqlens(spec.cu_seqlens_k.data(), p.batch, p.total_k,
                                                    p.seqlen_k, "cu_seqlens_k"),
                                  p));
  }
  RETURN_IF_ERROR(CheckPrintable("kernel", request.kernel(), kMaxKernelNameBytes));
  absl::StatusOr<const KernelHandle*> kernel = catalog.Resolve(request.kernel(), p);
  if (!kernel.ok()) return WithWireNames(kernel.status(), p);
  spec.kernel = *kernel;
  // Within the kernel's rules; now this server's buffers. A varlen sequence
  // counts as at least one token, so rows (LSE, offsets) stay bounded too.
  RETURN_IF_ERROR(CheckTokenLimit("q", InputShapeText(spec, InputTensor::kQ),
                                  std::max(p.QTokens(), p.batch), p.heads_q, p.head_dim, limits));
  RETURN_IF_ERROR(CheckTokenLimit("k", InputShapeText(spec, InputTensor::kK),
                                  std::max(p.KVTokens(), p.batch), p.heads_kv, p.head_dim,
                                  limits));
  return spec;
}

absl::Status CheckTensorBytes(InputTensor tensor, int64_t bytes, const RequestSpec& spec) {
  const int64_t needed = InputBytes(spec, tensor);
  if (bytes == needed) return absl::OkStatus();
  const char* name = InputName(tensor);
  if (bytes == 0) {
    return absl::InvalidArgumentError(absl::StrFormat("%s is empty; shape %s in %s needs %d bytes",
                                                      name, InputShapeText(spec, tensor),
                                                      DTypeName(spec.dtype), needed));
  }
  return absl::InvalidArgumentError(absl::StrFormat("%s has %d bytes; shape %s in %s needs %d",
                                                    name, bytes, InputShapeText(spec, tensor),
                                                    DTypeName(spec.dtype), needed));
}

absl::StatusOr<RequestSpec> DecodeAttendRequest(const pb::AttendRequest& request,
                                                const Limits& limits,
                                                const KernelCatalog& catalog) {
  return DecodeAttendRequest(request,
                             {static_cast<int64_t>(request.q().size()),
                              static_cast<int64_t>(request.k().size()),
                              static_cast<int64_t>(request.v().size())},
                             limits, catalog);
}

absl::StatusOr<RequestSpec> DecodeAttendRequest(const pb::AttendRequest& header,
                                                const std::array<int64_t, 3>& tensor_bytes,
                                                const Limits& limits,
                                                const KernelCatalog& catalog) {
  ASSIGN_OR_RETURN(RequestSpec spec, DecodeRequestHeader(header, limits, catalog));
  const bool by_reference[3] = {header.has_q_ref(), header.has_k_ref(), header.has_v_ref()};
  for (InputTensor t : {InputTensor::kQ, InputTensor::kK, InputTensor::kV}) {
    // A tensor in a region is checked with its reference (region_refs.h).
    if (by_reference[static_cast<int>(t)]) continue;
    RETURN_IF_ERROR(CheckTensorBytes(t, tensor_bytes[static_cast<int>(t)], spec));
  }
  return spec;
}

pb::DType ToProto(DType dtype) {
  return dtype == DType::kBFloat16 ? pb::DTYPE_BFLOAT16 : pb::DTYPE_FLOAT16;
}

void ToProto(const AttentionProblem& problem, pb::TensorShape* proto) {
  proto->set_batch(problem.batch);
  proto->set_seq_len(problem.seqlen_q);
  proto->set_num_heads(problem.heads_q);
  proto->set_head_dim(problem.head_dim);
  // Left 0 (and so off the wire) when equal: a request without the kv
  // fields gets back exactly the shape it sent.
  proto->set_kv_seq_len(problem.seqlen_k != problem.seqlen_q ? problem.seqlen_k : 0);
  proto->set_kv_num_heads(problem.heads_kv != problem.heads_q ? problem.heads_kv : 0);
}

pb::TensorPath ToProto(SourceKind kind) {
  switch (kind) {
    case SourceKind::kMessage:
      return pb::TENSOR_PATH_INLINE;
    case SourceKind::kSystemRegion:
      return pb::TENSOR_PATH_SYSTEM_SHM;
    case SourceKind::kDeviceRegion:
      return pb::TENSOR_PATH_CUDA_IPC;
  }
  return pb::TENSOR_PATH_UNSPECIFIED;
}

pb::TensorPath ToProto(DestinationKind kind) {
  switch (kind) {
    case DestinationKind::kResponse:
    case DestinationKind::kHost:
      return pb::TENSOR_PATH_INLINE;
    case DestinationKind::kSystemRegion:
      return pb::TENSOR_PATH_SYSTEM_SHM;
    case DestinationKind::kDeviceRegion:
      return pb::TENSOR_PATH_CUDA_IPC;
  }
  return pb::TENSOR_PATH_UNSPECIFIED;
}

void ToProto(const PhaseTimes& times, pb::Timing* proto) {
  proto->set_receive_ns(times.receive_ns);
  proto->set_decode_ns(times.decode_ns);
  proto->set_queue_ns(times.queue_ns);
  proto->set_h2d_ns(times.h2d_ns);
  proto->set_kernel_ns(times.kernel_ns);
  proto->set_d2h_ns(times.d2h_ns);
  proto->set_total_ns(times.total_ns);
  proto->set_batch_size(times.batch_size);
}

double KernelTflops(const RequestSpec& spec, int64_t kernel_ns) {
  if (kernel_ns <= 0) return 0.0;
  return spec.Flops() / static_cast<double>(kernel_ns) * 1e-3;  // flop/ns = 1e-3 TFLOP/s
}

void EncodeResponseHeader(const Job& job, absl::string_view backend,
                          pb::AttendResponse* response) {
  const RequestSpec& spec = job.spec;
  response->set_request_id(spec.request_id);
  response->set_dtype(ToProto(spec.dtype));
  ToProto(spec.problem, response->mutable_shape());
  pb::Timing* timing = response->mutable_timing();
  ToProto(job.times, timing);
  // The paths only when a tensor used a region: a request with every tensor
  // inline gets exactly the response it got before regions existed.
  if (job.UsesRegions()) {
    timing->set_q_path(ToProto(job.q.kind()));
    timing->set_k_path(ToProto(job.k.kind()));
    timing->set_v_path(ToProto(job.v.kind()));
    timing->set_out_path(ToProto(job.out.kind));
    if (spec.problem.return_lse) timing->set_lse_path(ToProto(job.lse.kind));
  }
  response->set_kernel(spec.kernel_info().name);
  response->set_backend(std::string(backend));
  response->set_device(job.device);
  response->set_kernel_tflops(KernelTflops(spec, job.times.kernel_ns));
}

}  // namespace attn::server
