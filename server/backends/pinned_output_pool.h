// server/backends/pinned_output_pool.h
//
// PinnedOutputPool: one pinned host block per CUDA executor, allocated
// once, that O and the LSE are copied into from the device and that the
// front end then sends the response from (an OutputBuffer, core/job.h),
// so the output is never copied on the host. Each response gets a range
// sized to its output (first_fit_ranges.h), so small outputs do not each
// hold a buffer of the largest request's size. A range comes back when
// gRPC frees the response's slices, on whatever thread that happens; when
// no free range is large enough, Take() gives null and the executor copies
// out of its own staging as before, so a slow client never stalls the GPU.
//
// The pool lives as long as any buffer it lent (each holds a reference),
// so a response still being sent at shutdown keeps its memory.
#ifndef ATTN_SERVER_PINNED_OUTPUT_POOL_H_
#define ATTN_SERVER_PINNED_OUTPUT_POOL_H_

#include <cstddef>
#include <memory>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "backends/cuda_memory.h"
#include "pinned_heap/first_fit_ranges.h"
#include "core/job.h"

namespace attn::server {

class PinnedOutputPool : public std::enable_shared_from_this<PinnedOutputPool> {
 public:
  // One lent range while an executor fills it and the front end sends it:
  // O at data(), the LSE at lse_data().
  class Lent final : public OutputBuffer {
   public:
    ~Lent() override { pool_->Return(offset_, lse_offset_ + lse_); }
    char* data() const { return data_; }
    char* lse_data() const { return data_ + lse_offset_; }
    absl::string_view out() const override { return absl::string_view(data_, out_); }
    absl::string_view lse() const override { return absl::string_view(data_ + lse_offset_, lse_); }

   private:
    friend class PinnedOutputPool;
    Lent(std::shared_ptr<PinnedOutputPool> pool, char* data, size_t offset, size_t out,
         size_t lse_offset, size_t lse)
        : pool_(std::move(pool)),
          data_(data),
          offset_(offset),
          out_(out),
          lse_offset_(lse_offset),
          lse_(lse) {}
    const std::shared_ptr<PinnedOutputPool> pool_;
    char* const data_;
    const size_t offset_, out_, lse_offset_, lse_;
  };

  // One pinned block of `bytes` for `device`.
  static absl::StatusOr<std::shared_ptr<PinnedOutputPool>> Create(size_t bytes, int device);

  // A range for `out` bytes of O and `lse` of LSE, or null when no free
  // range is that large.
  std::unique_ptr<Lent> Take(size_t out, size_t lse);

  size_t arena_bytes() const { return ranges_.arena_bytes(); }

 private:
  // Ranges start at page multiples, so each DMA and each slice is aligned.
  static constexpr size_t kAlignment = 4096;

  explicit PinnedOutputPool(PinnedBuffer block, size_t bytes)
      : block_(std::move(block)), ranges_(bytes, kAlignment) {}
  void Return(size_t offset, size_t bytes);

  const PinnedBuffer block_;
  absl::Mutex mu_;
  FirstFitRanges ranges_ ABSL_GUARDED_BY(mu_);
};

}  // namespace attn::server

#endif  // ATTN_SERVER_PINNED_OUTPUT_POOL_H_
