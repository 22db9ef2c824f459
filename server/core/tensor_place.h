// server/core/tensor_place.h
//
// Where a request's tensors are: each input has a TensorSource, each output
// a TensorDestination. This is the server's one vocabulary of placement: the
// front end sets them (message pieces by the request reader and the stream
// assembler, regions by region_refs), executors plan a span of jobs over
// them (backends/launch_plan.h), and the response reports them (the wire's
// TensorPath, frontend/tensor_codec.h).
//
// A new kind of source (e.g. the pages of a server-resident KV cache) is a
// new SourceKind here and one case in each executor's routing; nothing else
// switches on it.
//
// Both are views: whoever builds a Job keeps the memory alive until the
// job's `done` callback has run (job.h).
#ifndef ATTN_SERVER_CORE_TENSOR_PLACE_H_
#define ATTN_SERVER_CORE_TENSOR_PLACE_H_

#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "absl/strings/string_view.h"

namespace attn::server {

enum class SourceKind {
  // Host pieces of the request message, in order: the slices gRPC received
  // a unary request into (frontend/sliced_request_reader.h), or the buffer
  // an AttendStream call assembled. Pieces that gRPC read into the pinned
  // heap's arena go to the device by DMA, the rest through staging (the
  // CUDA executor's routing decides, per piece).
  kMessage,
  // Host memory of a registered system region (regions/region.h): one
  // piece, page-locked by the CUDA backend, so it is copied to the device
  // from where it is.
  kSystemRegion,
  // Device memory of a registered CUDA region: one piece whose data() is a
  // device pointer (never read it on the host); a lone kernel reads it in
  // place.
  kDeviceRegion,
};

// True for the kinds whose bytes the host may read.
inline bool OnHost(SourceKind kind) { return kind != SourceKind::kDeviceRegion; }

// The bytes of one input tensor where they already are, as one or more
// pieces in order.
class TensorSource {
 public:
  TensorSource() = default;
  // Message bytes in one contiguous piece.
  explicit TensorSource(absl::string_view bytes) { Append(bytes); }
  // The tensor is these bytes of a registered region (`kind` kSystemRegion
  // or kDeviceRegion).
  static TensorSource InRegion(absl::string_view bytes, SourceKind kind) {
    TensorSource t(bytes);
    t.kind_ = kind;
    return t;
  }

  // Appends a piece of message bytes.
  void Append(absl::string_view piece) {
    if (piece.empty()) return;
    pieces_.push_back(piece);
    size_ += static_cast<int64_t>(piece.size());
  }
  void Clear() {
    pieces_.clear();
    size_ = 0;
    kind_ = SourceKind::kMessage;
  }

  SourceKind kind() const { return kind_; }
  bool on_device() const { return !OnHost(kind_); }
  bool in_region() const { return kind_ != SourceKind::kMessage; }
  // The first piece's address (a region's tensor: its only one); null when
  // empty.
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
  SourceKind kind_ = SourceKind::kMessage;
};

enum class DestinationKind {
  // Into the response, which can be sent from memory the executor lends
  // (an OutputBuffer, job.h: no copy on the host); into `host` when the
  // executor has none to lend.
  kResponse,
  // Into `host` (a front end that sends from its own strings).
  kHost,
  // Host memory of a registered system region, at `data`.
  kSystemRegion,
  // Device memory of a registered CUDA region, at `data` (a device
  // pointer); a lone kernel writes it in place.
  kDeviceRegion,
};

// Where one output tensor goes.
struct TensorDestination {
  DestinationKind kind = DestinationKind::kHost;
  std::string* host = nullptr;  // kResponse, kHost: resized to the output's bytes
  char* data = nullptr;         // the regions

  static TensorDestination Response(std::string* host) {
    return {DestinationKind::kResponse, host, nullptr};
  }
  static TensorDestination Host(std::string* host) {
    return {DestinationKind::kHost, host, nullptr};
  }
  static TensorDestination InRegion(DestinationKind kind, char* data) {
    return {kind, nullptr, data};
  }

  bool in_region() const {
    return kind == DestinationKind::kSystemRegion || kind == DestinationKind::kDeviceRegion;
  }
  bool on_device() const { return kind == DestinationKind::kDeviceRegion; }
  // Somewhere to write: a host string or a region.
  bool set() const { return in_region() ? data != nullptr : host != nullptr; }
};

}  // namespace attn::server

#endif  // ATTN_SERVER_CORE_TENSOR_PLACE_H_
