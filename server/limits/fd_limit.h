// server/limits/fd_limit.h
//
// The process's open-file limit. Every client connection takes a file
// descriptor, and gRPC 1.51 stops accepting on a listening socket for good
// after one accept4() fails with EMFILE (its POSIX TCP server treats every
// accept error but EINTR/EAGAIN as fatal for that listener), so the server
// raises its soft RLIMIT_NOFILE to the hard limit at start.
#ifndef ATTN_SERVER_LIMITS_FD_LIMIT_H_
#define ATTN_SERVER_LIMITS_FD_LIMIT_H_

#include <cstdint>
#include <string>

namespace attn::server {

struct FdLimit {
  uint64_t before = 0;  // soft limit found at start
  uint64_t soft = 0;    // soft limit now
  uint64_t hard = 0;
  std::string error;    // why it could not be raised ("" if it was, or needed not be)
};

// Raises the soft RLIMIT_NOFILE to the hard limit.
FdLimit RaiseFdLimit();

// The connection cap that keeps the server clear of its open-file limit
// `soft`: the limit less what the rest of the process may hold (gRPC's
// polling, the metrics endpoint and its clients, CUDA's device files, logs):
// 128 descriptors, or half the limit when that is smaller.
int64_t ConnectionsWithinFdLimit(uint64_t soft);

}  // namespace attn::server

#endif  // ATTN_SERVER_LIMITS_FD_LIMIT_H_
