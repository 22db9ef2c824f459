#include "wire_codec.h"

#include <array>
#include <cstring>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "attn/sliced_message.h"
#include "google/protobuf/io/coded_stream.h"
#include "google/protobuf/wire_format_lite.h"
#include "grpcpp/support/slice.h"

namespace attn::internal {
namespace {

namespace pb = ::attnserve::v1;

// Field numbers of AttendRequest's tensors (attention.proto).
constexpr int kFieldQ = 6;
constexpr int kFieldK = 7;
constexpr int kFieldV = 8;
using ::google::protobuf::internal::WireFormatLite;
using ::google::protobuf::io::CodedOutputStream;

// Tag and length of a length-delimited field of `size` bytes, encoded by
// protobuf's own wire-format helpers.
std::string FieldPrefix(int field, uint64_t size) {
  const uint32_t tag = WireFormatLite::MakeTag(field, WireFormatLite::WIRETYPE_LENGTH_DELIMITED);
  std::string prefix(CodedOutputStream::VarintSize32(tag) + CodedOutputStream::VarintSize64(size),
                     '\0');
  uint8_t* end = CodedOutputStream::WriteTagToArray(tag, reinterpret_cast<uint8_t*>(&prefix[0]));
  CodedOutputStream::WriteVarint64ToArray(size, end);
  return prefix;
}

// Slice destructor: drops the reference the slice held on its owner (the
// inputs, or a step request's tensors).
void ReleaseOwner(void* keepalive) { delete static_cast<std::shared_ptr<const void>*>(keepalive); }

grpc::Slice BorrowedSlice(absl::string_view bytes, std::shared_ptr<const void> owner) {
  // gRPC never writes through a slice it sends; the cast only satisfies the
  // constructor's signature.
  return grpc::Slice(const_cast<char*>(bytes.data()), bytes.size(), &ReleaseOwner,
                     new std::shared_ptr<const void>(std::move(owner)));
}

absl::Status CheckMatches(const pb::AttendResponse& response, const AttentionInputs& inputs) {
  DType dtype;
  if (absl::Status s = FromProto(response.dtype(), &dtype); !s.ok()) {
    return absl::InternalError(absl::StrCat("response: ", s.message()));
  }
  Shape shape = FromProto(response.shape());
  // With varlen the request may leave seq_len to the server (0 = derived
  // from cu_seqlens_q); the output's size is checked separately.
  if (inputs.varlen()) shape.seq_len = inputs.shape.seq_len;
  const pb::TensorShape& s = response.shape();
  const bool kv_differs = (s.kv_seq_len() != 0 && s.kv_seq_len() != inputs.SeqLenKv() &&
                           !inputs.varlen()) ||
                          (s.kv_num_heads() != 0 && s.kv_num_heads() != inputs.NumHeadsKv());
  if (dtype != inputs.dtype || shape != inputs.shape || kv_differs) {
    return absl::InternalError(absl::StrCat(
        "response describes a ", DTypeName(dtype), " ", shape.ToString(), " output for a ",
        DTypeName(inputs.dtype), " ", inputs.shape.ToString(), " request"));
  }
  return absl::OkStatus();
}

void TakeMetadata(pb::AttendResponse& response, AttendResult* result) {
  result->request_id = std::move(*response.mutable_request_id());
  result->server = FromProto(response.timing());
  result->kernel = std::move(*response.mutable_kernel());
  result->backend = std::move(*response.mutable_backend());
  result->device = std::move(*response.mutable_device());
  result->kernel_tflops = response.kernel_tflops();
}

}  // namespace

pb::DType ToProto(DType dtype) {
  return dtype == DType::kBFloat16 ? pb::DTYPE_BFLOAT16 : pb::DTYPE_FLOAT16;
}

absl::Status FromProto(pb::DType proto, DType* dtype) {
  switch (proto) {
    case pb::DTYPE_FLOAT16:
      *dtype = DType::kFloat16;
      return absl::OkStatus();
    case pb::DTYPE_BFLOAT16:
      *dtype = DType::kBFloat16;
      return absl::OkStatus();
    default:
      return absl::InvalidArgumentError(
          absl::StrCat("dtype: unsupported value ", static_cast<int>(proto)));
  }
}

pb::TensorShape ToProto(const Shape& shape) {
  pb::TensorShape proto;
  proto.set_batch(shape.batch);
  proto.set_seq_len(shape.seq_len);
  proto.set_num_heads(shape.num_heads);
  proto.set_head_dim(shape.head_dim);
  return proto;
}

Shape FromProto(const pb::TensorShape& proto) {
  return Shape{proto.batch(), proto.seq_len(), proto.num_heads(), proto.head_dim()};
}

ServerTiming FromProto(const pb::Timing& proto) {
  ServerTiming timing;
  timing.receive_ns = proto.receive_ns();
  timing.decode_ns = proto.decode_ns();
  timing.queue_ns = proto.queue_ns();
  timing.h2d_ns = proto.h2d_ns();
  timing.kernel_ns = proto.kernel_ns();
  timing.d2h_ns = proto.d2h_ns();
  timing.total_ns = proto.total_ns();
  timing.batch_size = proto.batch_size();
  auto path = [](pb::TensorPath p) {
    switch (p) {
      case pb::TENSOR_PATH_INLINE:
        return TensorPath::kInline;
      case pb::TENSOR_PATH_SYSTEM_SHM:
        return TensorPath::kSystemShm;
      case pb::TENSOR_PATH_CUDA_IPC:
        return TensorPath::kCudaIpc;
      default:
        return TensorPath::kUnspecified;
    }
  };
  timing.q_path = path(proto.q_path());
  timing.k_path = path(proto.k_path());
  timing.v_path = path(proto.v_path());
  timing.out_path = path(proto.out_path());
  timing.lse_path = path(proto.lse_path());
  return timing;
}

pb::AttendRequest MakeRequestHeader(const AttentionInputs& inputs, const AttendOptions& options) {
  pb::AttendRequest header;
  header.set_request_id(options.request_id);
  header.set_dtype(ToProto(inputs.dtype));
  *header.mutable_shape() = ToProto(inputs.shape);
  // proto3 leaves zero/false/empty fields out of the encoding: a request
  // without the newer features is byte-identical to the seed's.
  header.mutable_shape()->set_kv_seq_len(inputs.kv_seq_len);
  header.mutable_shape()->set_kv_num_heads(inputs.kv_num_heads);
  if (options.softmax_scale.has_value()) header.set_softmax_scale(*options.softmax_scale);
  header.set_kernel(options.kernel);
  header.set_causal(options.causal);
  if (options.window_left != -1) header.set_window_left(options.window_left);
  if (options.window_right != -1) header.set_window_right(options.window_right);
  header.set_return_lse(options.return_lse);
  const struct {
    const TensorRef& ref;
    pb::TensorRef* (pb::AttendRequest::*field)();
  } refs[] = {{inputs.q_ref, &pb::AttendRequest::mutable_q_ref},
              {inputs.k_ref, &pb::AttendRequest::mutable_k_ref},
              {inputs.v_ref, &pb::AttendRequest::mutable_v_ref},
              {options.out_ref, &pb::AttendRequest::mutable_out_ref},
              {options.lse_ref, &pb::AttendRequest::mutable_lse_ref}};
  for (const auto& r : refs) {
    if (!r.ref.set()) continue;
    pb::TensorRef* ref = (header.*r.field)();
    ref->set_region_id(r.ref.region_id);
    ref->set_offset(r.ref.offset);
    ref->set_byte_size(r.ref.byte_size);
  }
  header.mutable_cu_seqlens_q()->Assign(inputs.cu_seqlens_q.begin(), inputs.cu_seqlens_q.end());
  header.mutable_cu_seqlens_k()->Assign(inputs.cu_seqlens_k.begin(), inputs.cu_seqlens_k.end());
  return header;
}

int64_t EncodedRequestBytes(const pb::AttendRequest& header, int64_t q_bytes, int64_t kv_bytes) {
  auto field = [](int number, int64_t bytes) {
    return static_cast<int64_t>(WireFormatLite::TagSize(number, WireFormatLite::TYPE_BYTES) +
                                WireFormatLite::LengthDelimitedSize(static_cast<size_t>(bytes)));
  };
  return static_cast<int64_t>(header.ByteSizeLong()) + field(kFieldQ, q_bytes) +
         field(kFieldK, kv_bytes) + field(kFieldV, kv_bytes);
}

grpc::ByteBuffer EncodeAttendRequest(const pb::AttendRequest& header,
                                     std::shared_ptr<const AttentionInputs> inputs) {
  // Protobuf parsers accept fields in any order, and the header leaves q, k
  // and v empty (proto3 omits empty bytes), so appending them is equivalent
  // to serialising the full message.
  std::string head = header.SerializeAsString();
  head += FieldPrefix(kFieldQ, inputs->QData().size());
  const grpc::Slice slices[] = {
      grpc::Slice(head),
      BorrowedSlice(inputs->QData(), inputs),
      grpc::Slice(FieldPrefix(kFieldK, inputs->KData().size())),
      BorrowedSlice(inputs->KData(), inputs),
      grpc::Slice(FieldPrefix(kFieldV, inputs->VData().size())),
      BorrowedSlice(inputs->VData(), inputs),
  };
  return grpc::ByteBuffer(slices, sizeof(slices) / sizeof(slices[0]));
}

grpc::ByteBuffer EncodeStepRequest(pb::AttendSessionsRequest request) {
  // The tensors leave the message (their strings move, no bytes are
  // copied) and follow its other fields, as in EncodeAttendRequest.
  auto tensors = std::make_shared<std::array<std::string, 3>>();
  (*tensors)[0].swap(*request.mutable_q());
  (*tensors)[1].swap(*request.mutable_k());
  (*tensors)[2].swap(*request.mutable_v());
  constexpr int kFields[] = {pb::AttendSessionsRequest::kQFieldNumber,
                             pb::AttendSessionsRequest::kKFieldNumber,
                             pb::AttendSessionsRequest::kVFieldNumber};
  std::vector<grpc::Slice> slices;
  slices.emplace_back(request.SerializeAsString());
  for (int i = 0; i < 3; ++i) {
    const std::string& tensor = (*tensors)[i];
    slices.emplace_back(FieldPrefix(kFields[i], tensor.size()));
    if (!tensor.empty()) slices.push_back(BorrowedSlice(tensor, tensors));
  }
  return grpc::ByteBuffer(slices.data(), slices.size());
}

absl::Status TakeResponseHeader(pb::AttendResponse& header, const AttentionInputs& inputs,
                                AttendResult* result) {
  if (absl::Status s = CheckMatches(header, inputs); !s.ok()) return s;
  result->dtype = inputs.dtype;
  result->shape = inputs.shape;
  TakeMetadata(header, result);
  return absl::OkStatus();
}

absl::Status DecodeLse(const std::string& bytes, int64_t elements, std::vector<float>* lse) {
  if (static_cast<int64_t>(bytes.size()) != elements * 4) {
    return absl::InternalError(absl::StrCat("response: lse has ", bytes.size(),
                                            " bytes, expected ", elements * 4));
  }
  lse->resize(static_cast<size_t>(elements));
  // float32 little-endian on the wire, as on every host this builds for.
  static_assert(sizeof(float) == 4);
  if (!bytes.empty()) std::memcpy(lse->data(), bytes.data(), bytes.size());
  return absl::OkStatus();
}

int64_t SlicedResponse::OutBytes() const {
  int64_t bytes = 0;
  for (absl::string_view piece : out) bytes += static_cast<int64_t>(piece.size());
  return bytes;
}

absl::Status ReadResponse(const grpc::ByteBuffer& bytes, SlicedResponse* response) {
  constexpr int kOutField[] = {pb::AttendResponse::kOutFieldNumber};
  std::vector<std::vector<absl::string_view>> pieces;
  std::string header_bytes;
  response->slices.clear();
  if (!bytes.Dump(&response->slices).ok() ||
      !wire::SplitSlicedMessage(response->slices, kOutField, &pieces, &header_bytes) ||
      !response->header.ParseFromString(header_bytes)) {
    return absl::InternalError("response: not a valid attnserve.v1.AttendResponse");
  }
  response->out = std::move(pieces[0]);
  return absl::OkStatus();
}

absl::Status TakeResponseButOutput(SlicedResponse& sliced, const AttentionInputs& inputs,
                                   const AttendOptions& options, AttendResult* result) {
  pb::AttendResponse& response = sliced.header;
  if (absl::Status s = TakeResponseHeader(response, inputs, result); !s.ok()) return s;
  // Outputs written to regions are not in the response.
  const int64_t out_bytes = options.out_ref.set() ? 0 : inputs.QBytes();
  if (sliced.OutBytes() != out_bytes) {
    return absl::InternalError(absl::StrCat("response: out has ", sliced.OutBytes(),
                                            " bytes, expected ", out_bytes));
  }
  const bool lse_inline = options.return_lse && !options.lse_ref.set();
  if (absl::Status s = DecodeLse(response.lse(), lse_inline ? inputs.LseElements() : 0,
                                 &result->lse);
      !s.ok()) {
    return s;
  }
  result->out.clear();
  // The server names the paths only when a region was used: the rest
  // travelled inline.
  ServerTiming& t = result->server;
  auto fill = [](TensorPath* path, bool used, bool by_reference) {
    if (*path == TensorPath::kUnspecified && used && !by_reference) *path = TensorPath::kInline;
  };
  fill(&t.q_path, true, inputs.q_ref.set());
  fill(&t.k_path, true, inputs.k_ref.set());
  fill(&t.v_path, true, inputs.v_ref.set());
  fill(&t.out_path, true, options.out_ref.set());
  fill(&t.lse_path, options.return_lse, options.lse_ref.set());
  return absl::OkStatus();
}

void CopyPieces(absl::Span<const absl::string_view> pieces, char* to) {
  for (absl::string_view piece : pieces) {
    std::memcpy(to, piece.data(), piece.size());
    to += piece.size();
  }
}

absl::Status TakeResponse(SlicedResponse& sliced, const AttentionInputs& inputs,
                          const AttendOptions& options, AttendResult* result) {
  if (absl::Status s = TakeResponseButOutput(sliced, inputs, options, result); !s.ok()) return s;
  // O's one copy, from the slices (appended, not resized and overwritten:
  // no pass of zeros first).
  if (options.out_destination != nullptr && !options.out_ref.set()) {
    CopyPieces(sliced.out, options.out_destination);
  } else {
    result->out.reserve(static_cast<size_t>(sliced.OutBytes()));
    for (absl::string_view piece : sliced.out) result->out.append(piece.data(), piece.size());
  }
  return absl::OkStatus();
}

}  // namespace attn::internal
