#include "sessions/session_memory.h"

#include <algorithm>
#include <climits>
#include <cstring>

namespace attn::server {
namespace {

class HostMemory final : public SessionMemory {
 public:
  HostMemory(int64_t num_pages, int64_t page_bytes)
      : memory_(new char[static_cast<size_t>(num_pages * page_bytes)]),
        layout_{memory_.get(), num_pages, page_bytes, -1} {}

  const PoolLayout& layout() const override { return layout_; }

  absl::Status CopyPage(int32_t dst, int32_t src, int64_t bytes) override {
    for (int64_t half : {int64_t{0}, layout_.page_bytes / 2}) {
      std::memcpy(layout_.base + dst * layout_.page_bytes + half,
                  layout_.base + src * layout_.page_bytes + half, static_cast<size_t>(bytes));
    }
    return absl::OkStatus();
  }

 private:
  const std::unique_ptr<char[]> memory_;
  const PoolLayout layout_;
};

}  // namespace

int64_t PoolPages(int64_t pool_bytes, int64_t page_bytes) {
  if (pool_bytes <= 0 || page_bytes <= 0) return 0;
  return std::min<int64_t>(pool_bytes / page_bytes, INT32_MAX);
}

std::unique_ptr<SessionMemory> HostSessionMemory(int64_t num_pages, int64_t page_bytes) {
  return std::make_unique<HostMemory>(num_pages, page_bytes);
}

}  // namespace attn::server
