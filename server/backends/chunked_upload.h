// server/backends/chunked_upload.h
//
// ChunkedUpload: request tensors from the host memory gRPC received them
// into (TensorSource) to device memory, through a small ring of pinned slots
// that every request reuses. Each chunk of a tensor is copied into the next
// free slot (ParallelCopier), and its DMA from that slot is enqueued at
// once, so one chunk's copy overlaps the previous chunk's DMA.
//
// The idea: a B=1, S=4096, H=16, d=128 request stages 48 MiB, more than
// stays in the CPU's caches next to the transport's buffers, so staging it
// whole writes it out to DRAM and the DMA engine reads it back from there.
// A ring of a few MiB, written and read again and again, could stay in the
// last-level cache, which serves the DMA engine's reads. Measured on the
// H200 host (bench/RESULTS.md, 2026-12-02 fourth run): 2 and 4 MiB chunks
// served fewer requests than staging whole (each chunk is one more
// hand-off to the copy threads), 8 MiB within the runs' spread of it; so
// the CUDA executor stages whole unless --staging_chunk_bytes says
// otherwise.
//
// CUDA builds only. One per executor, used by its worker thread only.
#ifndef ATTN_SERVER_CHUNKED_UPLOAD_H_
#define ATTN_SERVER_CHUNKED_UPLOAD_H_

#include <cuda_runtime.h>

#include <cstddef>
#include <memory>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "backends/cuda_memory.h"
#include "backends/parallel_copier.h"
#include "core/tensor_place.h"

namespace attn::server {

class ChunkedUpload {
 public:
  struct Tensor {
    const TensorSource* source;  // host bytes
    void* device;               // device memory for all of source's bytes
  };

  // A ring of `slots` slots of `slot_bytes` each at `ring`: page-locked
  // memory, not owned, that outlives this and that nothing else writes
  // while an Enqueue()'s DMAs may still read it. On the current device
  // `device`.
  static absl::StatusOr<std::unique_ptr<ChunkedUpload>> Create(char* ring, size_t slot_bytes,
                                                               int slots, int device,
                                                               ParallelCopier* copier);

  // Copies every tensor's bytes, a slot at a time, into the ring and
  // enqueues each slot's DMA to the tensor's device memory on `stream`.
  // Returns once the last DMA is enqueued: later work on `stream` runs after
  // them; the ring is free again when they have finished. A slot is written
  // only after the DMA that last read it has finished.
  absl::Status Enqueue(absl::Span<const Tensor> tensors, cudaStream_t stream);

  size_t slot_bytes() const { return slot_bytes_; }
  int slots() const { return static_cast<int>(slot_read_.size()); }

 private:
  ChunkedUpload(char* ring, size_t slot_bytes, int device, ParallelCopier* copier)
      : ring_(ring), slot_bytes_(slot_bytes), device_(device), copier_(copier) {}

  char* const ring_;
  const size_t slot_bytes_;
  const int device_;
  ParallelCopier* const copier_;
  // Recorded after each slot's last DMA; waited for (sleeping, not
  // spinning: the cores are the transport's) before the slot is written.
  std::vector<CudaEvent> slot_read_;
  int next_slot_ = 0;
};

}  // namespace attn::server

#endif  // ATTN_SERVER_CHUNKED_UPLOAD_H_
