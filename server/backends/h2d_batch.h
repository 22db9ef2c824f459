// server/backends/h2d_batch.h
//
// H2DBatch: many host-to-device copies enqueued on a stream with one
// cudaMemcpyBatchAsync (CUDA 12.8+) instead of one cudaMemcpyAsync each.
// A tensor gRPC received into the pinned heap arrives in 64 KiB slices: 770
// copies for 48 MiB, and enqueueing them one by one took the worker about 5
// ms of API calls per B=1, S=4096, H=16, D=128 request on the H200 host
// (the h2d phase of bench/RESULTS.md, 2026-12-02 fifth run, call O), longer
// than the DMA itself. Batched, the h2d phase took 1.6 ms (0.25 ms at
// S=512, from 0.66; call P). Where the driver has no batch copies
// (cudaErrorNotSupported, or one older than the runtime) it falls back to
// one call per copy, logged once.
//
// CUDA builds only. Reused by one executor's worker thread: Clear, Add,
// Enqueue.
#ifndef ATTN_SERVER_H2D_BATCH_H_
#define ATTN_SERVER_H2D_BATCH_H_

#include <cuda_runtime.h>

#include <cstddef>
#include <vector>

#include "absl/status/status.h"

namespace attn::server {

class H2DBatch {
 public:
  explicit H2DBatch(int device) : device_(device) {}

  void Clear() {
    to_.clear();
    from_.clear();
    bytes_.clear();
  }
  // Copies `bytes` from page-locked host memory at `from` to device memory
  // at `to`; the copies of one batch must not overlap.
  void Add(void* to, const void* from, size_t bytes) {
    if (bytes == 0) return;
    to_.push_back(to);
    from_.push_back(from);
    bytes_.push_back(bytes);
  }

  // Enqueues every copy added since Clear() on `stream` (in stream order:
  // after the work enqueued before, before the work enqueued after).
  absl::Status Enqueue(cudaStream_t stream);

 private:
  const int device_;
  std::vector<void*> to_;
  std::vector<const void*> from_;
  std::vector<size_t> bytes_;
};

}  // namespace attn::server

#endif  // ATTN_SERVER_H2D_BATCH_H_
