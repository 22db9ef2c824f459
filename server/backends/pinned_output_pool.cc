#include "backends/pinned_output_pool.h"

#include <utility>

namespace attn::server {

absl::StatusOr<std::shared_ptr<PinnedOutputPool>> PinnedOutputPool::Create(size_t bytes,
                                                                           int device) {
  absl::StatusOr<PinnedBuffer> block = AllocatePinned(bytes, device);
  if (!block.ok()) return block.status();
  return std::shared_ptr<PinnedOutputPool>(new PinnedOutputPool(*std::move(block), bytes));
}

std::unique_ptr<PinnedOutputPool::Lent> PinnedOutputPool::Take(size_t out, size_t lse) {
  // The LSE starts at the next aligned offset after O.
  const size_t lse_offset = AlignUp(out, kAlignment);
  std::optional<size_t> offset;
  {
    absl::MutexLock lock(&mu_);
    offset = ranges_.Take(lse_offset + lse);
  }
  if (!offset.has_value()) return nullptr;
  char* data = static_cast<char*>(block_.get()) + *offset;
  return std::unique_ptr<Lent>(
      new Lent(shared_from_this(), data, *offset, out, lse_offset, lse));
}

void PinnedOutputPool::Return(size_t offset, size_t bytes) {
  absl::MutexLock lock(&mu_);
  ranges_.Return(offset, bytes);
}

}  // namespace attn::server
