#include "attn/sliced_message.h"

#include <algorithm>
#include <cstdint>
#include <limits>

#include "google/protobuf/io/coded_stream.h"
#include "google/protobuf/io/zero_copy_stream.h"
#include "google/protobuf/wire_format_lite.h"

namespace attn::wire {
namespace {

using google::protobuf::internal::WireFormatLite;
using google::protobuf::io::CodedInputStream;

// protobuf's view of a list of slices, without copying them. (grpc's own
// ProtoBufferReader reads the ByteBuffer itself; this one reads slices the
// caller holds, so the pointers it hands out stay valid after the call's
// buffer goes.)
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

// The longest tag or length protobuf's parser reads: a varint of 32 bits.
// (CodedInputStream reads up to 10 bytes and drops the excess; the generated
// parser refuses them.)
constexpr int kMaxVarint32Bytes = 5;

// Walks the slices once, in order, copying or skipping the bytes up to a
// position of the body.
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

bool SplitSlicedMessage(const std::vector<grpc::Slice>& slices, absl::Span<const int> fields,
                        std::vector<std::vector<absl::string_view>>* pieces, std::string* rest) {
  pieces->assign(fields.size(), {});
  rest->clear();
  SliceInputStream stream(slices);
  CodedInputStream in(&stream);
  in.SetTotalBytesLimit(std::numeric_limits<int>::max());
  SliceCursor cursor(slices);
  while (true) {
    const int field_start = in.CurrentPosition();
    const uint32_t tag = in.ReadTag();
    if (tag == 0) {
      // The end of the body, or a tag that is malformed, cut short by the
      // end, or 0: only the first is a message.
      return in.ConsumedEntireMessage();
    }
    if (in.CurrentPosition() - field_start > kMaxVarint32Bytes) return false;
    const auto chosen =
        WireFormatLite::GetTagWireType(tag) == WireFormatLite::WIRETYPE_LENGTH_DELIMITED
            ? std::find(fields.begin(), fields.end(), WireFormatLite::GetTagFieldNumber(tag))
            : fields.end();
    if (chosen == fields.end()) {
      if (!WireFormatLite::SkipField(&in, tag)) return false;
      cursor.MoveTo(in.CurrentPosition(), rest);
      continue;
    }
    const int length_start = in.CurrentPosition();
    uint32_t length = 0;
    if (!in.ReadVarint32(&length)) return false;
    if (in.CurrentPosition() - length_start > kMaxVarint32Bytes) return false;
    std::vector<absl::string_view>& target = (*pieces)[chosen - fields.begin()];
    target.clear();  // the last occurrence wins
    while (length > 0) {
      const void* data = nullptr;
      int size = 0;
      if (!in.GetDirectBufferPointer(&data, &size)) return false;  // truncated
      const int take = static_cast<int>(std::min<uint32_t>(length, static_cast<uint32_t>(size)));
      target.emplace_back(static_cast<const char*>(data), take);
      in.Skip(take);
      length -= static_cast<uint32_t>(take);
    }
    cursor.MoveTo(in.CurrentPosition(), nullptr);
  }
}

}  // namespace attn::wire
