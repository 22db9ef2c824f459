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

struct LoadSnapshot {
  int64_t queued = 0;   // jobs waiting for a worker
  int64_t running = 0;  // jobs a worker is running
  // Bytes held by AttendStream calls (--max_stream_buffer_bytes) and by all
  // admitted calls (--max_admitted_bytes), with those limits.
  int64_t stream_buffer_bytes = 0;
  int64_t stream_buffer_limit_bytes = 0;
  int64_t admitted_bytes = 0;
  int64_t admitted_limit_bytes = 0;

  // One per scheduler worker, in the scheduler's order.
  struct Worker {
    std::string executor;  // Executor::Name(), e.g. "NVIDIA H200 (cuda:0, stream 1)"
    bool healthy = true;   // false once the worker retired (or could not start)
  };
  std::vector<Worker> workers;
};

}  // namespace attn::server

#endif  // ATTN_SERVER_OBSERVABILITY_LOAD_SNAPSHOT_H_
