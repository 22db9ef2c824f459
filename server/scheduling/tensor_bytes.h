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
//
// Or the bytes of a registered shared-memory region (regions/region.h): one
// piece of host memory that the CUDA backend has page-locked, so it copies
// straight from it to the device (kSystemRegion), or one piece of device
// memory that the kernel reads in place (kCudaRegion; its data() is a device
// pointer: never read it on the host).
#ifndef ATTN_SERVER_TENSOR_BYTES_H_
#define ATTN_SERVER_TENSOR_BYTES_H_

#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "absl/strings/string_view.h"

namespace attn::server {

// How a tensor travels between the client and the kernel (the wire's
// TensorPath).
enum class TensorPath { kInline, kSystemRegion, kCudaRegion };

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
    path_ = TensorPath::kInline;
  }
  // The tensor is these bytes of a registered region (`path` kSystemRegion
  // or kCudaRegion).
  static TensorBytes InRegion(absl::string_view bytes, TensorPath path) {
    TensorBytes t(bytes);
    t.path_ = path;
    return t;
  }

  TensorPath path() const { return path_; }
  bool on_device() const { return path_ == TensorPath::kCudaRegion; }
  // The one piece's address (a region's tensor); null when empty.
  const char* data() const { return pieces_.empty() ? nullptr : pieces_.front().data(); }

  int64_t size() const { return size_; }
  const std::vector<absl::string_view>& pieces() const { return pieces_; }

  // Copies all size() bytes to `dst`, in order. Host bytes only.
  void CopyTo(char* dst) const {
    for (absl::string_view piece : pieces_) {
      std::memcpy(dst, piece.data(), piece.size());
      dst += piece.size();
    }
  }

  // The bytes as one array starting at a multiple of `alignment`: the piece
  // itself when there is one (or none) and it is aligned, else gathered into
  // *scratch (whose buffer is at least 8-byte aligned), which must outlive
  // the view; `alignment` is at most 8. Host bytes only.
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
  TensorPath path_ = TensorPath::kInline;
};

// Where an output goes when the request named a region for it: the executor
// writes it at `data` (host memory of a system region, or device memory of
// a CUDA region) instead of into the job's strings or a lent buffer.
struct OutputPlace {
  TensorPath path = TensorPath::kInline;
  char* data = nullptr;  // null for kInline
  bool in_region() const { return path != TensorPath::kInline; }
};

}  // namespace attn::server

#endif  // ATTN_SERVER_TENSOR_BYTES_H_
