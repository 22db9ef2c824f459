#include "tensor_codec.h"

#include <cmath>
#include <limits>
#include <string>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "status_util.h"

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

absl::StatusOr<Shape> DecodeShape(const pb::AttendRequest& request, const Limits& limits) {
  if (!request.has_shape()) {
    return absl::InvalidArgumentError(
        "shape is missing; set shape.batch, shape.seq_len, shape.num_heads and shape.head_dim");
  }
  const pb::TensorShape& proto = request.shape();
  Shape shape{proto.batch(), proto.seq_len(), proto.num_heads(), proto.head_dim()};
  for (const Shape::NamedDim& dim : shape.NamedDims()) {
    if (dim.value < 1 || dim.value > kMaxDimension) {
      return absl::InvalidArgumentError(absl::StrFormat(
          "shape.%s is %d; it must be between 1 and %d", dim.name, dim.value, kMaxDimension));
    }
  }
  // Elements of one tensor, saturating instead of overflowing int64.
  int64_t elements = 1;
  bool overflow = false;
  for (const Shape::NamedDim& dim : shape.NamedDims()) {
    if (elements > std::numeric_limits<int64_t>::max() / dim.value) {
      overflow = true;
      break;
    }
    elements *= dim.value;
  }
  if (overflow || elements > limits.max_tokens_per_request) {
    const std::string needed = overflow ? std::string("more than 2^63") : absl::StrCat(elements);
    return absl::ResourceExhaustedError(absl::StrFormat(
        "request needs %s tokens (batch*seq_len*num_heads*head_dim of shape %s); this "
        "server's limit is %d (--max_tokens_per_request)",
        needed, shape.ToString(), limits.max_tokens_per_request));
  }
  return shape;
}

}  // namespace

absl::StatusOr<RequestSpec> DecodeRequestHeader(const pb::AttendRequest& request,
                                                const Limits& limits,
                                                const KernelCatalog& catalog) {
  RequestSpec spec;
  RETURN_IF_ERROR(CheckPrintable("request_id", request.request_id(), kMaxRequestIdBytes));
  spec.request_id = request.request_id();
  ASSIGN_OR_RETURN(spec.dtype, DecodeDType(request.dtype()));
  ASSIGN_OR_RETURN(spec.shape, DecodeShape(request, limits));
  if (request.has_softmax_scale()) {
    const float scale = request.softmax_scale();
    if (!std::isfinite(scale) || scale <= 0.0f) {
      return absl::InvalidArgumentError(absl::StrFormat(
          "softmax_scale is %g; it must be finite and > 0 (or unset for 1/sqrt(head_dim))", scale));
    }
    spec.softmax_scale = scale;
  }
  RETURN_IF_ERROR(CheckPrintable("kernel", request.kernel(), kMaxKernelNameBytes));
  ASSIGN_OR_RETURN(spec.kernel, catalog.Resolve(request.kernel(), spec.shape));
  return spec;
}

absl::Status CheckTensorBytes(absl::string_view name, int64_t bytes, const RequestSpec& spec) {
  const int64_t needed = spec.TensorBytes();
  if (bytes == needed) return absl::OkStatus();
  if (bytes == 0) {
    return absl::InvalidArgumentError(absl::StrFormat("%s is empty; shape %s in %s needs %d bytes",
                                                      name, spec.shape.ToString(),
                                                      DTypeName(spec.dtype), needed));
  }
  return absl::InvalidArgumentError(absl::StrFormat("%s has %d bytes; shape %s in %s needs %d",
                                                    name, bytes, spec.shape.ToString(),
                                                    DTypeName(spec.dtype), needed));
}

absl::StatusOr<RequestSpec> DecodeAttendRequest(const pb::AttendRequest& request,
                                                const Limits& limits,
                                                const KernelCatalog& catalog) {
  ASSIGN_OR_RETURN(RequestSpec spec, DecodeRequestHeader(request, limits, catalog));
  RETURN_IF_ERROR(CheckTensorBytes("q", static_cast<int64_t>(request.q().size()), spec));
  RETURN_IF_ERROR(CheckTensorBytes("k", static_cast<int64_t>(request.k().size()), spec));
  RETURN_IF_ERROR(CheckTensorBytes("v", static_cast<int64_t>(request.v().size()), spec));
  return spec;
}

pb::DType ToProto(DType dtype) {
  return dtype == DType::kBFloat16 ? pb::DTYPE_BFLOAT16 : pb::DTYPE_FLOAT16;
}

void ToProto(const Shape& shape, pb::TensorShape* proto) {
  proto->set_batch(shape.batch);
  proto->set_seq_len(shape.seq_len);
  proto->set_num_heads(shape.num_heads);
  proto->set_head_dim(shape.head_dim);
}

void ToProto(const PhaseTimes& times, pb::Timing* proto) {
  proto->set_receive_ns(times.receive_ns);
  proto->set_decode_ns(times.decode_ns);
  proto->set_queue_ns(times.queue_ns);
  proto->set_h2d_ns(times.h2d_ns);
  proto->set_kernel_ns(times.kernel_ns);
  proto->set_d2h_ns(times.d2h_ns);
  proto->set_total_ns(times.total_ns);
}

double KernelTflops(const RequestSpec& spec, int64_t kernel_ns) {
  if (kernel_ns <= 0) return 0.0;
  return spec.Flops() / static_cast<double>(kernel_ns) * 1e-3;  // flop/ns = 1e-3 TFLOP/s
}

void EncodeResponseHeader(const RequestSpec& spec, const PhaseTimes& times,
                          absl::string_view backend, absl::string_view device,
                          pb::AttendResponse* response) {
  response->set_request_id(spec.request_id);
  response->set_dtype(ToProto(spec.dtype));
  ToProto(spec.shape, response->mutable_shape());
  ToProto(times, response->mutable_timing());
  response->set_kernel(spec.kernel.name);
  response->set_backend(std::string(backend));
  response->set_device(std::string(device));
  response->set_kernel_tflops(KernelTflops(spec, times.kernel_ns));
}

}  // namespace attn::server
