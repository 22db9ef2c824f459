#include "backends/pinned_output_pool.h"

#include <utility>

namespace attn::server {

absl::StatusOr<std::shared_ptr<PinnedOutputPool>> PinnedOutputPool::Create(int count,
                                                                           size_t bytes,
                                                                           int device) {
  std::shared_ptr<PinnedOutputPool> pool(new PinnedOutputPool(bytes));
  for (int i = 0; i < count; ++i) {
    absl::StatusOr<PinnedBuffer> buffer = AllocatePinned(bytes, device);
    if (!buffer.ok()) return buffer.status();
    pool->free_.push_back(static_cast<char*>(buffer->get()));
    pool->buffers_.push_back(*std::move(buffer));
  }
  return pool;
}

std::unique_ptr<PinnedOutputPool::Lent> PinnedOutputPool::Take() {
  char* data = nullptr;
  {
    absl::MutexLock lock(&mu_);
    if (free_.empty()) return nullptr;
    data = free_.back();
    free_.pop_back();
  }
  return std::unique_ptr<Lent>(new Lent(shared_from_this(), data));
}

void PinnedOutputPool::Return(char* data) {
  absl::MutexLock lock(&mu_);
  free_.push_back(data);
}

}  // namespace attn::server
