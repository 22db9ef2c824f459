// server/scheduling/tensor_bytes.h
//
// TensorBytes: the bytes of one input tensor where they already are, as one
// or more pieces in order: the slices gRPC received a unary request into
// (frontend/attend_request_reader.h), or one buffer an AttendStream call
// assembled. A view: whoever builds a Job keeps the pieces alive until the
// job's `done` callback has run (job.h).
//
// Executors copy the pieces once, straight into their staging memory
// (CopyTo); only a consumer that needs one contiguous array and gets several
// pieces (the CPU kernel) gathers them (Contiguous).
#ifndef ATTN_SERVER_TENSOR_BYTES_H_
#define ATTN_SERVER_TENSOR_BYTES_H_

#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "absl/strings/string_view.h"

namespace attn::server {

class TensorBytes {
 public:
  TensorBytes() = default;
  // One contiguous piece.
  explicit TensorBytes(absl::string_view bytes) { Append(bytes); }

  void Append(absl::string_view piece) {
    if (piece.empty()) return;
    pieces_.push_back(piece);
    size_ += static_cast<int64_t>(piece.size());
  }
  void Clear() {
    pieces_.clear();
    size_ = 0;
  }

  int64_t size() const { return size_; }
  const std::vector<absl::string_view>& pieces() const { return pieces_; }

  // Copies all size() bytes to `dst`, in order.
  void CopyTo(char* dst) const {
    for (absl::string_view piece : pieces_) {
      std::memcpy(dst, piece.data(), piece.size());
      dst += piece.size();
    }
  }

  // The bytes as one array starting at a multiple of `alignment`: the piece
  // itself when there is one (or none) and it is aligned, else gathered into
  // *scratch (whose buffer is at least 8-byte aligned), which must outlive
  // the view; `alignment` is at most 8.
  // A piece of a received message starts wherever its field did.
  absl::string_view Contiguous(std::string* scratch, size_t alignment) const {
    if (pieces_.empty()) return absl::string_view();
    if (pieces_.size() == 1 &&
        reinterpret_cast<uintptr_t>(pieces_.front().data()) % alignment == 0) {
      return pieces_.front();
    }
    scratch->resize(static_cast<size_t>(size_));
    CopyTo(scratch->data());
    return *scratch;
  }

 private:
  std::vector<absl::string_view> pieces_;
  int64_t size_ = 0;
};

}  // namespace attn::server

#endif  // ATTN_SERVER_TENSOR_BYTES_H_
