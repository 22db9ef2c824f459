// server/backends/parallel_copier.h
//
// ParallelCopier: host-to-host copies of request tensors split over several
// threads. One thread copying the slices gRPC just received into pinned
// staging runs at about 5 GB/s on an H200 host: 10 of the 14 ms a worker
// spent per B=1, S=4096, H=16, D=128 request (48 MiB in; bench/RESULTS.md,
// issue 11), which bounded each CUDA stream to about 70 requests/s. Split
// into 1 MiB chunks over a few threads, the copy takes a fraction of that.
//
// One copier serves every executor: Copy() may be called from several
// workers at once; each call returns when all of its bytes are copied. The
// calling thread copies too, so a copier with 0 helper threads is a plain
// sequential copy. A Copy() of at least `streaming_min_bytes` in all copies
// each chunk with CopyWithStreamingStores (streaming_copy.h) instead of
// memcpy: for destinations only a DMA engine reads afterwards, too large to
// stay in the caches anyway.
#ifndef ATTN_SERVER_PARALLEL_COPIER_H_
#define ATTN_SERVER_PARALLEL_COPIER_H_

#include <cstddef>
#include <cstdint>
#include <deque>
#include <memory>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "core/tensor_place.h"

namespace attn::server {

class ParallelCopier {
 public:
  // What Copy() copies: `count` of `source`'s bytes from byte `offset` on
  // (by default all of them), in order, to `destination`.
  struct Task {
    const TensorSource* source;
    char* destination;
    int64_t offset = 0;
    int64_t count = -1;  // -1: to the end of `source`
  };

  ParallelCopier(int helper_threads, size_t streaming_min_bytes);
  ~ParallelCopier();
  ParallelCopier(const ParallelCopier&) = delete;
  ParallelCopier& operator=(const ParallelCopier&) = delete;

  void Copy(const std::vector<Task>& tasks);

  int helper_threads() const { return static_cast<int>(helpers_.size()); }

 private:
  struct Chunk {
    const char* from;
    char* to;
    size_t bytes;
  };
  // The chunks of one Copy() call, taken by whoever is free.
  struct Batch {
    std::vector<Chunk> chunks;
    bool streaming = false;  // chunks are copied with streaming stores
    size_t next = 0;       // first chunk nobody took yet
    size_t remaining = 0;  // chunks not yet copied
  };

  // Takes and copies chunks of `batch` until none is left to take.
  void Drain(const std::shared_ptr<Batch>& batch);
  void HelperLoop();

  absl::Mutex mu_;
  std::deque<std::shared_ptr<Batch>> pending_ ABSL_GUARDED_BY(mu_);  // batches with chunks to take
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  const size_t streaming_min_bytes_;
  std::vector<std::thread> helpers_;
};

}  // namespace attn::server

#endif  // ATTN_SERVER_PARALLEL_COPIER_H_
