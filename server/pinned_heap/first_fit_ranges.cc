#include "pinned_heap/first_fit_ranges.h"

#include <iterator>

namespace attn::server {

FirstFitRanges::FirstFitRanges(size_t bytes, size_t alignment)
    : arena_bytes_(bytes / alignment * alignment), alignment_(alignment), free_bytes_(0) {
  if (arena_bytes_ > 0) {
    free_[0] = arena_bytes_;
    free_bytes_ = arena_bytes_;
  }
}

size_t FirstFitRanges::Rounded(size_t bytes) const {
  return AlignUp(bytes == 0 ? 1 : bytes, alignment_);
}

std::optional<size_t> FirstFitRanges::Take(size_t bytes) {
  if (bytes > arena_bytes_) return std::nullopt;
  const size_t need = Rounded(bytes);
  for (auto it = free_.begin(); it != free_.end(); ++it) {
    if (it->second < need) continue;
    const size_t offset = it->first;
    const size_t left = it->second - need;
    free_.erase(it);
    if (left > 0) free_[offset + need] = left;
    free_bytes_ -= need;
    return offset;
  }
  return std::nullopt;
}

void FirstFitRanges::Return(size_t offset, size_t bytes) {
  size_t length = Rounded(bytes);
  free_bytes_ += length;
  auto next = free_.lower_bound(offset);
  if (next != free_.end() && offset + length == next->first) {
    length += next->second;
    next = free_.erase(next);
  }
  if (next != free_.begin()) {
    auto prev = std::prev(next);
    if (prev->first + prev->second == offset) {
      prev->second += length;
      return;
    }
  }
  free_[offset] = length;
}

}  // namespace attn::server
