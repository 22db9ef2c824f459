#include "limits/fd_limit.h"

#include <sys/resource.h>

#include <cerrno>
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

}  // namespace attn::server
