#include "frontend/attend_request_reader.h"

#include <algorithm>
#include <cstdint>
#include <limits>
#include <string>

#include "google/protobuf/io/coded_stream.h"
#include "google/protobuf/io/zero_copy_stream.h"
#include "google/protobuf/wire_format_lite.h"

namespace attn::server {
namespace {

namespace pb = ::attnserve::v1;
using google::protobuf::internal::WireFormatLite;
using google::protobuf::io::CodedInputStream;

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

// The longest tag or length protobuf's parser reads: a varint of 32 bits.
// (CodedInputStream reads up to 10 bytes and drops the excess; the generated
// parser refuses them.)
constexpr int kMaxVarint32Bytes = 5;

// Walks the slices once, in order, copying or skipping the bytes up to a
// position of the body: every field but the tensors is copied, byte for
// byte, for the generated parser.
class SliceCursor {
 public:
  explicit SliceCursor(const std::vector<grpc::Slice>& slices) : slices_(slices) {}

  // Moves to body position `end`, appending the bytes passed to *out
  // (nullptr: skipping them).
  void MoveTo(int64_t end, std::string* out) {
    while (position_ < end) {
      const grpc::Slice& slice = slices_[index_];
      const int64_t take =
          std::min<int64_t>(static_cast<int64_t>(slice.size() - offset_), end - position_);
      if (out != nullptr) {
        out->append(reinterpret_cast<const char*>(slice.begin()) + offset_,
                    static_cast<size_t>(take));
      }
      offset_ += static_cast<size_t>(take);
      position_ += take;
      if (offset_ == slice.size()) {
        ++index_;
        offset_ = 0;
      }
    }
  }

 private:
  const std::vector<grpc::Slice>& slices_;
  size_t index_ = 0;
  size_t offset_ = 0;  // within slices_[index_]
  int64_t position_ = 0;
};

}  // namespace

bool AttendRequestReader::Parse(const grpc::ByteBuffer& bytes) {
  Release();
  if (!bytes.Dump(&slices_).ok()) return false;

  SliceInputStream stream(slices_);
  CodedInputStream in(&stream);
  in.SetTotalBytesLimit(std::numeric_limits<int>::max());
  // Every field but the tensors, copied as it came, for the generated
  // parser: its rules (encodings, UTF-8, groups, merging) apply to them
  // exactly.
  std::string header_bytes;
  SliceCursor cursor(slices_);
  while (true) {
    const int field_start = in.CurrentPosition();
    const uint32_t tag = in.ReadTag();
    if (tag == 0) {
      // The end of the body, or a tag that is malformed, cut short by the
      // end, or 0: only the first is a message.
      if (!in.ConsumedEntireMessage()) return false;
      break;
    }
    if (in.CurrentPosition() - field_start > kMaxVarint32Bytes) return false;
    const int field = WireFormatLite::GetTagFieldNumber(tag);
    const bool tensor =
        WireFormatLite::GetTagWireType(tag) == WireFormatLite::WIRETYPE_LENGTH_DELIMITED &&
        (field == kQField || field == kKField || field == kVField);
    if (!tensor) {
      if (!WireFormatLite::SkipField(&in, tag)) return false;
      cursor.MoveTo(in.CurrentPosition(), &header_bytes);
      continue;
    }
    const int length_start = in.CurrentPosition();
    uint32_t length = 0;
    if (!in.ReadVarint32(&length)) return false;
    if (in.CurrentPosition() - length_start > kMaxVarint32Bytes) return false;
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
    cursor.MoveTo(in.CurrentPosition(), nullptr);
  }
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
