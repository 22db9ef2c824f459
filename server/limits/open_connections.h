// server/limits/open_connections.h
//
// OpenConnections: the client connections this server handed to gRPC that
// gRPC has not closed yet, counted for --max_connections.
//
// Why not ask gRPC: 1.51 has no connection count, no callback when it closes
// a connection, and no cap (a "max incoming connections" channel argument
// came in a later release; ResourceQuota bounds memory and threads only).
// What 1.51 does guarantee is that a connection is its socket: gRPC closes
// the descriptor when the connection ends, whatever ends it (the client goes,
// the handshake fails or times out, --max_connection_age_s, shutdown). So
// each descriptor is recorded with its socket's inode before it is handed
// over, and a connection counts as open while that descriptor number still
// names that same socket (fstat). A closed number (EBADF), or one reused for
// anything else (another inode), is a connection gone. Inodes of live
// sockets are unique, so a reused number is never taken for the old
// connection; a connection is at worst counted a moment after it closed.
//
// Thread-safe. A sweep for closed connections costs one fstat per recorded
// connection.
#ifndef ATTN_SERVER_LIMITS_OPEN_CONNECTIONS_H_
#define ATTN_SERVER_LIMITS_OPEN_CONNECTIONS_H_

#include <sys/types.h>

#include <cstdint>
#include <unordered_map>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"

namespace attn::server {

class OpenConnections {
 public:
  // Records the socket `fd` (before gRPC owns it) if fewer than `limit`
  // connections are open; false, recording nothing, if `limit` are (or `fd`
  // is not open). Forgets closed connections first only when `limit` are
  // recorded, so an accept below the cap costs no sweep.
  bool AddIfBelow(int fd, int64_t limit);

  // Connections whose descriptor still names the socket recorded for it;
  // forgets the others.
  int64_t Count();

 private:
  struct Socket {
    dev_t device;
    ino_t inode;
  };
  void ForgetClosed() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  absl::Mutex mu_;
  std::unordered_map<int, Socket> sockets_ ABSL_GUARDED_BY(mu_);  // by descriptor
};

}  // namespace attn::server

#endif  // ATTN_SERVER_LIMITS_OPEN_CONNECTIONS_H_
