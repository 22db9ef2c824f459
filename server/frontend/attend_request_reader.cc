#include "frontend/attend_request_reader.h"

#include <algorithm>
#include <cstdint>
#include <limits>
#include <string>

#include "google/protobuf/io/coded_stream.h"
#include "google/protobuf/io/zero_copy_stream.h"
#include "google/protobuf/io/zero_copy_stream_impl_lite.h"
#include "google/protobuf/wire_format_lite.h"

namespace attn::server {
namespace {

namespace pb = ::attnserve::v1;
using google::protobuf::internal::WireFormatLite;
using google::protobuf::io::CodedInputStream;
using google::protobuf::io::CodedOutputStream;

// protobuf's view of a list of slices, without copying them. (grpc's own
// ProtoBufferReader reads the ByteBuffer itself; this one reads slices we
// hold, so the pointers it hands out stay valid after the call's buffer
// goes.)
class SliceInputStream final : public google::protobuf::io::ZeroCopyInputStream {
 public:
  explicit SliceInputStream(const std::vector<grpc::Slice>& slices) : slices_(slices) {}

  bool Next(const void** data, int* size) override {
    if (backed_up_ > 0) {
      const grpc::Slice& s = slices_[index_ - 1];
      *data = s.begin() + (s.size() - backed_up_);
      *size = backed_up_;
      count_ += backed_up_;
      backed_up_ = 0;
      return true;
    }
    while (index_ < slices_.size() && slices_[index_].size() == 0) ++index_;
    if (index_ == slices_.size()) return false;
    const grpc::Slice& s = slices_[index_++];
    *data = s.begin();
    *size = static_cast<int>(s.size());  // a message is below 2 GiB
    count_ += *size;
    return true;
  }
  void BackUp(int count) override {
    backed_up_ = count;
    count_ -= count;
  }
  bool Skip(int count) override {
    const void* data = nullptr;
    int size = 0;
    while (count > 0) {
      if (!Next(&data, &size)) return false;
      if (size > count) {
        BackUp(size - count);
        return true;
      }
      count -= size;
    }
    return true;
  }
  int64_t ByteCount() const override { return count_; }

 private:
  const std::vector<grpc::Slice>& slices_;
  size_t index_ = 0;
  int backed_up_ = 0;  // bytes at the end of slices_[index_ - 1] not yet consumed
  int64_t count_ = 0;
};

// Field numbers of the tensors in attention.proto.
constexpr int kQField = pb::AttendRequest::kQFieldNumber;
constexpr int kKField = pb::AttendRequest::kKFieldNumber;
constexpr int kVField = pb::AttendRequest::kVFieldNumber;

}  // namespace

bool AttendRequestReader::Parse(const grpc::ByteBuffer& bytes) {
  Release();
  if (!bytes.Dump(&slices_).ok()) return false;
  size_t total = 0;
  for (const grpc::Slice& s : slices_) total += s.size();

  SliceInputStream stream(slices_);
  CodedInputStream in(&stream);
  in.SetTotalBytesLimit(std::numeric_limits<int>::max());
  // Every field but the tensors, re-serialized as it came, for the
  // generated parser.
  std::string header_bytes;
  {
    google::protobuf::io::StringOutputStream header_stream(&header_bytes);
    CodedOutputStream header_out(&header_stream);
    while (true) {
      const uint32_t tag = in.ReadTag();
      if (tag == 0) break;  // the end, or a malformed tag (told apart below)
      const int field = WireFormatLite::GetTagFieldNumber(tag);
      const bool tensor =
          WireFormatLite::GetTagWireType(tag) == WireFormatLite::WIRETYPE_LENGTH_DELIMITED &&
          (field == kQField || field == kKField || field == kVField);
      if (!tensor) {
        if (!WireFormatLite::SkipField(&in, tag, &header_out)) return false;
        continue;
      }
      uint32_t length = 0;
      if (!in.ReadVarint32(&length)) return false;
      TensorBytes& target = field == kQField ? q_ : field == kKField ? k_ : v_;
      target.Clear();  // the last occurrence wins
      while (length > 0) {
        const void* data = nullptr;
        int size = 0;
        if (!in.GetDirectBufferPointer(&data, &size)) return false;  // truncated
        const int take = static_cast<int>(std::min<uint32_t>(length, static_cast<uint32_t>(size)));
        target.Append(absl::string_view(static_cast<const char*>(data), take));
        in.Skip(take);
        length -= static_cast<uint32_t>(take);
      }
    }
  }
  // ReadTag gives 0 at the end and on a malformed tag: only the first
  // consumed everything.
  if (static_cast<size_t>(in.CurrentPosition()) != total) return false;
  return header_.ParseFromString(header_bytes);
}

void AttendRequestReader::Release() {
  q_.Clear();
  k_.Clear();
  v_.Clear();
  header_.Clear();
  slices_.clear();
}

}  // namespace attn::server
