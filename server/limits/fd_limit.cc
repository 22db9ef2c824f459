#include "limits/fd_limit.h"

#include <sys/resource.h>

#include <algorithm>
#include <cerrno>
#include <cstdint>
#include <cstring>

namespace attn::server {

FdLimit RaiseFdLimit() {
  FdLimit result;
  struct rlimit limit {};
  if (getrlimit(RLIMIT_NOFILE, &limit) != 0) {
    result.error = std::string("getrlimit(RLIMIT_NOFILE): ") + std::strerror(errno);
    return result;
  }
  result.before = result.soft = limit.rlim_cur;
  result.hard = limit.rlim_max;
  if (limit.rlim_cur >= limit.rlim_max) return result;
  limit.rlim_cur = limit.rlim_max;
  if (setrlimit(RLIMIT_NOFILE, &limit) != 0) {
    result.error = std::string("setrlimit(RLIMIT_NOFILE): ") + std::strerror(errno);
    return result;
  }
  result.soft = limit.rlim_cur;
  return result;
}

int64_t ConnectionsWithinFdLimit(uint64_t soft) {
  constexpr uint64_t kKeptForTheRest = 128;
  const uint64_t kept = std::min(kKeptForTheRest, soft / 2);
  return static_cast<int64_t>(std::min<uint64_t>(soft - kept, INT32_MAX));
}

}  // namespace attn::server
