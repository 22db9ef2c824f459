// server/observability/stats.h
//
// Stats: the server's cumulative counters (the GetStats RPC), in the style
// of Triton's statistics extension: counts and summed phase times since
// start, from which clients take deltas. Lock-free; safe from any thread.
#ifndef ATTN_SERVER_STATS_H_
#define ATTN_SERVER_STATS_H_

#include <atomic>
#include <cstdint>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "core/job.h"

namespace attn::server {

// Why a request failed, as far as the counters care.
enum class FailureKind {
  kOther,      // invalid request, kernel or device error, ...
  kQueueFull,  // refused by admission control
  kDeadline,   // deadline passed before it ran
  kCancelled,  // the client cancelled before it ran
  kDrain,      // the server ended it while draining (drain timeout, idle upload)
  kUploadTimeout,  // AttendStream idle or upload timeout
  kOverBudget,     // --max_admitted_bytes or --max_stream_buffer_bytes
};

// Who ended a failed call, for the request log: "client_cancel",
// "client_deadline", "server_drain", "queue_full", "upload_timeout",
// "over_budget", "request" (refused as invalid or over a limit) or "server".
absl::string_view EndedBy(FailureKind kind, absl::StatusCode code);

class Stats {
 public:
  Stats();

  // `bytes` of a successful request's tensors, inline and through regions.
  struct TensorBytesMoved {
    int64_t in = 0, out = 0;                // inline, in the messages
    int64_t region_in = 0, region_out = 0;  // read from / written to regions
  };
  void RecordSuccess(const PhaseTimes& times, const TensorBytesMoved& bytes);
  void RecordFailure(FailureKind kind);

  // The counters now (GetStats, less what the scheduler and budgets say).
  struct Snapshot {
    int64_t uptime_ns = 0;
    int64_t ok = 0, failed = 0, queue_full = 0, deadline = 0, cancelled = 0, drain = 0,
            upload_timeouts = 0, over_budget = 0;
    TensorBytesMoved bytes;
    PhaseTimes sums;  // summed over successful requests (batch_size unused)
  };
  Snapshot Read() const;

 private:
  const absl::Time start_;
  std::atomic<int64_t> ok_{0}, failed_{0}, queue_full_{0}, deadline_{0}, cancelled_{0}, drain_{0},
      upload_timeouts_{0}, over_budget_{0};
  std::atomic<int64_t> bytes_in_{0}, bytes_out_{0}, region_bytes_in_{0}, region_bytes_out_{0};
  std::atomic<int64_t> receive_ns_{0}, decode_ns_{0}, queue_ns_{0}, h2d_ns_{0}, kernel_ns_{0},
      d2h_ns_{0}, total_ns_{0};
};

}  // namespace attn::server

#endif  // ATTN_SERVER_STATS_H_
