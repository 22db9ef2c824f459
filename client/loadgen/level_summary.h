// The numbers a load level is reported with, computed from its records:
// counts and errors by status code, throughput (requests/s, tensor GB/s,
// attention TFLOP/s), latency percentiles, and the client- and server-side
// breakdown averaged over successful requests (plus GetStats deltas).
#ifndef ATTN_CLIENT_LOADGEN_LEVEL_SUMMARY_H_
#define ATTN_CLIENT_LOADGEN_LEVEL_SUMMARY_H_

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "attn/tensor.h"
#include "level_runner.h"

namespace attn::loadgen {

// Nearest-rank percentile (the smallest value with at least p% of the
// values at or below it) of ascending `sorted`; 0 when empty. p in [0, 100].
int64_t Percentile(const std::vector<int64_t>& sorted, double p);

struct LatencyStats {
  int64_t count = 0;
  double mean_ms = 0, stddev_ms = 0, min_ms = 0;
  double p50_ms = 0, p90_ms = 0, p95_ms = 0, p99_ms = 0, p999_ms = 0, max_ms = 0;
};
LatencyStats ComputeLatencyStats(std::vector<int64_t> latencies_ns);

// Averages over successful requests, in milliseconds. The client rows and
// server_total partition the mean round trip: marshal + network +
// server_total + unmarshal.
struct PhaseBreakdown {
  double client_marshal_ms = 0;
  double client_unmarshal_ms = 0;
  double network_ms = 0;  // round trip − marshal − unmarshal − server total
  double round_trip_ms = 0;
  double server_receive_ms = 0;  // streamed requests' upload, as the server saw it
  double server_decode_ms = 0, server_queue_ms = 0, server_h2d_ms = 0;
  double server_kernel_ms = 0, server_d2h_ms = 0, server_other_ms = 0, server_total_ms = 0;
};

// Differences of the server's cumulative counters over the level.
struct ServerStatsDelta {
  bool available = false;
  int64_t requests_ok = 0, requests_failed = 0;
  int64_t rejected_queue_full = 0, rejected_deadline = 0;
  double avg_queue_ms = 0, avg_kernel_ms = 0, avg_total_ms = 0;  // per ok request
  // Requests per batched launch (server-side batching); 0 when none was.
  double mean_batch_size = 0;
};

struct LevelSummary {
  LoadMode mode = LoadMode::kClosedLoop;
  int concurrency = 0;
  double target_rate = 0;

  // Accounting: sent = completed + failed, always (every sent request ends).
  int64_t sent = 0, completed = 0, failed = 0;
  std::map<std::string, int64_t> errors;  // status code name -> count
  int64_t unsent = 0;                     // open loop only
  int64_t late = 0;                       // open loop: sent > late_tolerance after due
  double late_percent = 0;
  int64_t streamed = 0;  // requests that went over AttendStream

  // Seconds from the window's start to the last measured completion: the
  // span throughput is measured over (it includes the drain, so a server
  // that falls behind is not credited with requests it had not finished).
  double window_s = 0;
  double send_rate = 0;  // measured sends per second of sending
  double throughput_rps = 0;
  double tensor_gbps = 0;  // (Q + K + V + O bytes) x completed / window, 1e9 B/s
  double tflops = 0;       // RequestCost::flops x completed / window, 1e12 FLOP/s

  LatencyStats latency;          // ok requests, from due time (open loop) or send
  LatencyStats service_latency;  // ok requests, from the actual send
  PhaseBreakdown phases;
  ServerStatsDelta server_stats;
};

// What one request costs: its FLOPs (AttentionProblem::Flops, over the
// visible query-key pairs: masks and ragged lengths count what is computed)
// and the tensor bytes it moves (Q, K, V in; O and, with return_lse, the LSE
// out).
struct RequestCost {
  double flops = 0;
  double tensor_bytes = 0;

  static RequestCost Of(const AttentionInputs& inputs, const AttendOptions& options);
  // Non-causal self-attention over `shape` (16-bit elements).
  static RequestCost SelfAttention(const Shape& shape);
};

// Summarizes `run` for requests costing `cost` each.
LevelSummary Summarize(const LevelRun& run, const RequestCost& cost);
// The same for self-attention requests of `shape`.
LevelSummary Summarize(const LevelRun& run, const Shape& shape);

// "c=8" (closed loop) or "r=100/s" (open loop).
std::string LevelLabel(const LevelSummary& summary);

}  // namespace attn::loadgen

#endif  // ATTN_CLIENT_LOADGEN_LEVEL_SUMMARY_H_
