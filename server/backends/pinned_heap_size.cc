#include "backends/pinned_heap_size.h"

#include <unistd.h>

#include <algorithm>
#include <fstream>
#include <string>

#include "absl/strings/numbers.h"
#include "absl/strings/str_format.h"
#include "absl/strings/strip.h"

namespace attn::server {
namespace {

// A cgroup limit file's number; nullopt for "max", absent or unreadable.
std::optional<int64_t> ReadLimit(const char* path) {
  std::ifstream file(path);
  std::string text;
  if (!file || !std::getline(file, text)) return std::nullopt;
  int64_t value = 0;
  if (!absl::SimpleAtoi(absl::StripAsciiWhitespace(text), &value) || value <= 0) {
    return std::nullopt;
  }
  return value;
}

}  // namespace

std::optional<int64_t> HostMemoryBytes() {
  std::optional<int64_t> bytes;
  const long pages = sysconf(_SC_PHYS_PAGES);
  const long page_size = sysconf(_SC_PAGE_SIZE);
  if (pages > 0 && page_size > 0) bytes = static_cast<int64_t>(pages) * page_size;
  // v1 reports "no limit" as a huge number, which the min leaves alone.
  for (const char* path :
       {"/sys/fs/cgroup/memory.max", "/sys/fs/cgroup/memory/memory.limit_in_bytes"}) {
    if (const std::optional<int64_t> limit = ReadLimit(path)) {
      bytes = bytes.has_value() ? std::min(*bytes, *limit) : *limit;
    }
  }
  return bytes;
}

absl::StatusOr<int64_t> ResolvePinnedHeapBytes(int64_t requested, int64_t admitted_budget,
                                               bool by_default,
                                               std::optional<int64_t> host_memory) {
  if (requested < 0) {
    if (!by_default) return 0;
    return host_memory.has_value() ? std::min(admitted_budget, *host_memory / 4)
                                   : admitted_budget;
  }
  if (host_memory.has_value() && requested > *host_memory / 2) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "--pinned_heap_bytes=%d is more than half of the memory this process may use (%d "
        "bytes, the cgroup's limit included); the CUDA backend page-locks all of it",
        requested, *host_memory));
  }
  return requested;
}

}  // namespace attn::server
