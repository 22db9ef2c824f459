// server/backends/pinned_output_pool.h
//
// PinnedOutputPool: a few pinned host buffers, allocated once per CUDA
// executor, that O and the LSE are copied into from the device and that the
// front end then sends the response from (an OutputBuffer, scheduling/job.h),
// so the output is never copied on the host. A lent buffer comes back when
// gRPC frees the response's slices, on whatever thread that happens; when
// all are lent, Take() gives null and the executor copies out of its own
// staging as before, so a slow client never stalls the GPU.
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
#include "scheduling/job.h"

namespace attn::server {

class PinnedOutputPool : public std::enable_shared_from_this<PinnedOutputPool> {
 public:
  // One pooled buffer while an executor fills it and the front end sends it.
  class Lent final : public OutputBuffer {
   public:
    ~Lent() override { pool_->Return(data_); }
    char* data() const { return data_; }
    // O is [0, out), the LSE [lse_offset, lse_offset + lse).
    void SetExtent(size_t out, size_t lse_offset, size_t lse) {
      out_ = out;
      lse_offset_ = lse_offset;
      lse_ = lse;
    }
    absl::string_view out() const override { return absl::string_view(data_, out_); }
    absl::string_view lse() const override { return absl::string_view(data_ + lse_offset_, lse_); }

   private:
    friend class PinnedOutputPool;
    Lent(std::shared_ptr<PinnedOutputPool> pool, char* data) : pool_(std::move(pool)), data_(data) {}
    const std::shared_ptr<PinnedOutputPool> pool_;
    char* const data_;
    size_t out_ = 0, lse_offset_ = 0, lse_ = 0;
  };

  // `count` buffers of `bytes` each, pinned for `device`.
  static absl::StatusOr<std::shared_ptr<PinnedOutputPool>> Create(int count, size_t bytes,
                                                                  int device);

  // A free buffer, or null when every one is lent.
  std::unique_ptr<Lent> Take();

  size_t buffer_bytes() const { return bytes_; }
  int count() const { return static_cast<int>(buffers_.size()); }

 private:
  PinnedOutputPool(size_t bytes) : bytes_(bytes) {}
  void Return(char* data);

  const size_t bytes_;
  std::vector<PinnedBuffer> buffers_;
  absl::Mutex mu_;
  std::vector<char*> free_ ABSL_GUARDED_BY(mu_);
};

}  // namespace attn::server

#endif  // ATTN_SERVER_PINNED_OUTPUT_POOL_H_
