#include "limits/open_connections.h"

#include <sys/stat.h>

#include <iterator>

namespace attn::server {

bool OpenConnections::AddIfBelow(int fd, int64_t limit) {
  struct stat info {};
  if (fstat(fd, &info) != 0) return false;
  absl::MutexLock lock(&mu_);
  // A number already recorded belongs to a connection gRPC has closed: the
  // number was free for accept() to return it.
  sockets_.erase(fd);
  if (static_cast<int64_t>(sockets_.size()) >= limit) ForgetClosed();
  if (static_cast<int64_t>(sockets_.size()) >= limit) return false;
  sockets_[fd] = Socket{info.st_dev, info.st_ino};
  return true;
}

int64_t OpenConnections::Count() {
  absl::MutexLock lock(&mu_);
  ForgetClosed();
  return static_cast<int64_t>(sockets_.size());
}

void OpenConnections::ForgetClosed() {
  for (auto it = sockets_.begin(); it != sockets_.end();) {
    struct stat info {};
    const bool same = fstat(it->first, &info) == 0 && info.st_dev == it->second.device &&
                      info.st_ino == it->second.inode;
    it = same ? std::next(it) : sockets_.erase(it);
  }
}

}  // namespace attn::server
