#include "frontend/response_writer.h"

#include <string>
#include <utility>
#include <vector>

#include "google/protobuf/io/coded_stream.h"
#include "google/protobuf/io/zero_copy_stream_impl_lite.h"
#include "google/protobuf/wire_format_lite.h"
#include "grpcpp/support/slice.h"

namespace attn::server {
namespace {

namespace pb = ::attnserve::v1;
using google::protobuf::internal::WireFormatLite;

// One reference to the lent memory per slice that points into it.
using SharedOutput = std::shared_ptr<const OutputBuffer>;

void ReleaseReference(void* reference) { delete static_cast<SharedOutput*>(reference); }

// A slice over `bytes` that keeps `output` alive until gRPC frees it.
grpc::Slice LentSlice(absl::string_view bytes, const SharedOutput& output) {
  return grpc::Slice(const_cast<char*>(bytes.data()), bytes.size(), &ReleaseReference,
                     new SharedOutput(output));
}

// The tag and length of a bytes field of `size` bytes, appended to `out`.
void AppendFieldHeader(int field, size_t size, std::string* out) {
  google::protobuf::io::StringOutputStream stream(out);
  google::protobuf::io::CodedOutputStream coded(&stream);
  WireFormatLite::WriteTag(field, WireFormatLite::WIRETYPE_LENGTH_DELIMITED, &coded);
  coded.WriteVarint32(static_cast<uint32_t>(size));
}

}  // namespace

template <typename Response>
grpc::ByteBuffer SerializeWithLentOutput(const Response& header,
                                         std::unique_ptr<OutputBuffer> output) {
  const SharedOutput shared(std::move(output));
  std::string head = header.SerializeAsString();
  std::vector<grpc::Slice> slices;
  AppendFieldHeader(Response::kOutFieldNumber, shared->out().size(), &head);
  slices.emplace_back(head);
  slices.push_back(LentSlice(shared->out(), shared));
  if (!shared->lse().empty()) {
    std::string lse_head;
    AppendFieldHeader(Response::kLseFieldNumber, shared->lse().size(), &lse_head);
    slices.emplace_back(lse_head);
    slices.push_back(LentSlice(shared->lse(), shared));
  }
  return grpc::ByteBuffer(slices.data(), slices.size());
}

template grpc::ByteBuffer SerializeWithLentOutput(const pb::AttendResponse&,
                                                  std::unique_ptr<OutputBuffer>);
template grpc::ByteBuffer SerializeWithLentOutput(const pb::AttendSessionsResponse&,
                                                  std::unique_ptr<OutputBuffer>);

}  // namespace attn::server
