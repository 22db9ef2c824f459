// server/observability/load_snapshot.h
//
// LoadSnapshot: what the server holds at one moment (the gauges), read
// together by Runtime::Load() for GetStats and for each metrics scrape, so
// both report the same quantities from one place. A plain struct: no protos,
// no locks.
#ifndef ATTN_SERVER_OBSERVABILITY_LOAD_SNAPSHOT_H_
#define ATTN_SERVER_OBSERVABILITY_LOAD_SNAPSHOT_H_

#include <cstdint>
#include <string>
#include <vector>

namespace attn::server {

// Client connections of the TCP listener (limits/tcp_acceptor.h).
struct ConnectionCounts {
  int64_t open = 0;                // connections gRPC holds now
  int64_t limit = 0;               // --max_connections (resolved)
  int64_t refused_over_limit = 0;  // closed at once: `limit` connections were open
  int64_t refused_no_fds = 0;      // closed at once: no file descriptor (EMFILE/ENFILE)
};

struct LoadSnapshot {
  int64_t queued = 0;   // jobs waiting for a worker
  int64_t running = 0;  // jobs a worker is running
  // Counters since start: launches that stacked two or more requests
  // (request batching), and the requests in them.
  int64_t batched_launches = 0;
  int64_t batched_requests = 0;
  // Bytes held by AttendStream calls (--max_stream_buffer_bytes) and by all
  // admitted calls (--max_admitted_bytes), with those limits.
  int64_t stream_buffer_bytes = 0;
  int64_t stream_buffer_limit_bytes = 0;
  int64_t admitted_bytes = 0;
  int64_t admitted_limit_bytes = 0;

  // The pinned heap (backends/heap_arena.h), all 0 when it is off: its
  // arena, the bytes it holds now, and the large allocations since start
  // it had no room for (glibc's instead, so tensors in them are staged).
  int64_t pinned_heap_bytes = 0;
  int64_t pinned_heap_used_bytes = 0;
  int64_t pinned_heap_overflows = 0;

  // KV-cache sessions (sessions/session_registry.h), all 0 when they are
  // off: sessions open, the pool's pages and those held or reserved, tokens
  // cached (over sessions and layers); counters since start: successful
  // step calls, tokens they appended, forks, sessions closed by the idle
  // timeout, and calls refused because the pool was full.
  int64_t sessions = 0;
  int64_t kv_pages_total = 0;
  int64_t kv_pages_used = 0;
  int64_t kv_tokens_cached = 0;
  int64_t session_steps = 0;
  int64_t session_tokens_appended = 0;
  int64_t session_forks = 0;
  int64_t sessions_expired = 0;
  int64_t rejected_pool_full = 0;

  // Filled by the server, not Runtime::Load (all 0 on a unix: listener).
  ConnectionCounts connections;

  // One per scheduler worker, in the scheduler's order.
  struct Worker {
    std::string executor;  // Executor::Name(), e.g. "NVIDIA H200 (cuda:0, stream 1)"
    bool healthy = true;   // false once the worker retired (or could not start)
  };
  std::vector<Worker> workers;
};

}  // namespace attn::server

#endif  // ATTN_SERVER_OBSERVABILITY_LOAD_SNAPSHOT_H_
