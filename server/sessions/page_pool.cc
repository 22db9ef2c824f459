#include "sessions/page_pool.h"

#include <algorithm>
#include <limits>

#include "absl/strings/str_format.h"

namespace attn::server {

PagePool::PagePool(int64_t num_pages)
    : total_(std::clamp<int64_t>(num_pages, 0, std::numeric_limits<int32_t>::max())) {
  free_.reserve(static_cast<size_t>(total_));
  // Page 0 on top, so the first session's pages come in order.
  for (int64_t p = total_ - 1; p >= 0; --p) free_.push_back(static_cast<int32_t>(p));
  refs_.assign(static_cast<size_t>(total_), 0);
}

int64_t PagePool::pages_free() const {
  std::lock_guard<std::mutex> lock(mu_);
  return static_cast<int64_t>(free_.size()) - reserved_;
}

absl::Status PagePool::Reserve(int64_t pages, absl::string_view what) {
  std::lock_guard<std::mutex> lock(mu_);
  const int64_t available = static_cast<int64_t>(free_.size()) - reserved_;
  if (pages < 0 || pages > available) {
    return absl::ResourceExhaustedError(absl::StrFormat(
        "the KV-cache pool is full: %s needs %d pages, %d of %d are free (--kv_cache_bytes)",
        what, pages, available, total_));
  }
  reserved_ += pages;
  return absl::OkStatus();
}

void PagePool::Unreserve(int64_t pages) {
  std::lock_guard<std::mutex> lock(mu_);
  reserved_ -= std::min(pages, reserved_);
}

absl::StatusOr<std::vector<int32_t>> PagePool::Take(int64_t count, int64_t from_reserved,
                                                    absl::string_view what) {
  std::lock_guard<std::mutex> lock(mu_);
  from_reserved = std::clamp<int64_t>(from_reserved, 0, std::min(count, reserved_));
  const int64_t available = static_cast<int64_t>(free_.size()) - reserved_;
  if (count < 0 || count - from_reserved > available) {
    return absl::ResourceExhaustedError(absl::StrFormat(
        "the KV-cache pool is full: %s needs %d new pages, %d of %d are free "
        "(--kv_cache_bytes)",
        what, count - from_reserved, available, total_));
  }
  reserved_ -= from_reserved;
  std::vector<int32_t> pages(free_.end() - count, free_.end());
  free_.resize(free_.size() - static_cast<size_t>(count));
  for (int32_t page : pages) refs_[static_cast<size_t>(page)] = 1;
  return pages;
}

void PagePool::Ref(int32_t page) {
  std::lock_guard<std::mutex> lock(mu_);
  ++refs_[static_cast<size_t>(page)];
}

void PagePool::Unref(int32_t page) {
  std::lock_guard<std::mutex> lock(mu_);
  int32_t& refs = refs_[static_cast<size_t>(page)];
  if (refs <= 0) return;  // never taken: nothing to give back
  if (--refs == 0) free_.push_back(page);
}

int64_t PagePool::UnrefAndReserve(const std::vector<int32_t>& pages, int64_t reserve) {
  std::lock_guard<std::mutex> lock(mu_);
  int64_t freed = 0;
  for (int32_t page : pages) {
    int32_t& refs = refs_[static_cast<size_t>(page)];
    if (refs <= 0) continue;
    if (--refs == 0) {
      free_.push_back(page);
      ++freed;
    }
  }
  const int64_t again = std::clamp<int64_t>(reserve, 0, freed);
  reserved_ += again;
  return again;
}

int32_t PagePool::refs(int32_t page) const {
  std::lock_guard<std::mutex> lock(mu_);
  return refs_[static_cast<size_t>(page)];
}

}  // namespace attn::server
