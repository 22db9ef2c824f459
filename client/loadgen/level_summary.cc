#include "level_summary.h"

#include <algorithm>
#include <cmath>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "attn/client/attend_types.h"
#include "attn/problem.h"

namespace attn::loadgen {
namespace {

double Ms(double ns) { return ns / 1e6; }

ServerStatsDelta StatsDelta(const LevelRun& run) {
  ServerStatsDelta delta;
  if (!run.stats_before.has_value() || !run.stats_after.has_value()) return delta;
  const attnserve::v1::ServerStats& a = *run.stats_before;
  const attnserve::v1::ServerStats& b = *run.stats_after;
  delta.available = true;
  delta.requests_ok = b.requests_ok() - a.requests_ok();
  delta.requests_failed = b.requests_failed() - a.requests_failed();
  delta.rejected_queue_full = b.rejected_queue_full() - a.rejected_queue_full();
  delta.rejected_deadline = b.rejected_deadline() - a.rejected_deadline();
  const int64_t launches = b.batched_launches() - a.batched_launches();
  if (launches > 0) {
    delta.mean_batch_size = static_cast<double>(b.batched_requests() - a.batched_requests()) /
                            static_cast<double>(launches);
  }
  if (delta.requests_ok > 0) {
    const double n = static_cast<double>(delta.requests_ok);
    delta.avg_queue_ms =
        Ms(static_cast<double>(b.cumulative().queue_ns() - a.cumulative().queue_ns()) / n);
    delta.avg_kernel_ms =
        Ms(static_cast<double>(b.cumulative().kernel_ns() - a.cumulative().kernel_ns()) / n);
    delta.avg_total_ms =
        Ms(static_cast<double>(b.cumulative().total_ns() - a.cumulative().total_ns()) / n);
  }
  return delta;
}

// Adds one request's phases, in nanoseconds, to `sums`.
void AddPhases(const RequestRecord& r, PhaseBreakdown* sums) {
  auto d = [](int64_t ns) { return static_cast<double>(ns); };
  sums->client_marshal_ms += d(r.client.marshal_ns);
  sums->client_unmarshal_ms += d(r.client.unmarshal_ns);
  sums->network_ms += d(r.client.NetworkNs(r.server));
  sums->round_trip_ms += d(r.client.round_trip_ns);
  sums->server_receive_ms += d(r.server.receive_ns);
  sums->server_decode_ms += d(r.server.decode_ns);
  sums->server_queue_ms += d(r.server.queue_ns);
  sums->server_h2d_ms += d(r.server.h2d_ns);
  sums->server_kernel_ms += d(r.server.kernel_ns);
  sums->server_d2h_ms += d(r.server.d2h_ns);
  sums->server_other_ms += d(r.server.OtherNs());
  sums->server_total_ms += d(r.server.total_ns);
}

PhaseBreakdown ScalePhases(PhaseBreakdown p, double factor) {
  for (double* field :
       {&p.client_marshal_ms, &p.client_unmarshal_ms, &p.network_ms, &p.round_trip_ms,
        &p.server_receive_ms, &p.server_decode_ms, &p.server_queue_ms, &p.server_h2d_ms,
        &p.server_kernel_ms, &p.server_d2h_ms, &p.server_other_ms, &p.server_total_ms}) {
    *field *= factor;
  }
  return p;
}

}  // namespace

int64_t Percentile(const std::vector<int64_t>& sorted, double p) {
  if (sorted.empty()) return 0;
  // The epsilon keeps p/100·n from rounding up past an exact rank (99.9% of
  // 1000 is 999, not 1000).
  const double rank = std::ceil(p / 100.0 * static_cast<double>(sorted.size()) - 1e-9);
  const size_t index =
      static_cast<size_t>(std::clamp(rank, 1.0, static_cast<double>(sorted.size()))) - 1;
  return sorted[index];
}

LatencyStats ComputeLatencyStats(std::vector<int64_t> latencies_ns) {
  LatencyStats stats;
  stats.count = static_cast<int64_t>(latencies_ns.size());
  if (latencies_ns.empty()) return stats;
  std::sort(latencies_ns.begin(), latencies_ns.end());
  double sum = 0;
  for (int64_t v : latencies_ns) sum += static_cast<double>(v);
  const double mean = sum / static_cast<double>(latencies_ns.size());
  double squares = 0;
  for (int64_t v : latencies_ns)
    squares += (static_cast<double>(v) - mean) * (static_cast<double>(v) - mean);
  stats.mean_ms = Ms(mean);
  stats.stddev_ms = Ms(std::sqrt(squares / static_cast<double>(latencies_ns.size())));
  stats.min_ms = Ms(static_cast<double>(latencies_ns.front()));
  stats.p50_ms = Ms(static_cast<double>(Percentile(latencies_ns, 50)));
  stats.p90_ms = Ms(static_cast<double>(Percentile(latencies_ns, 90)));
  stats.p95_ms = Ms(static_cast<double>(Percentile(latencies_ns, 95)));
  stats.p99_ms = Ms(static_cast<double>(Percentile(latencies_ns, 99)));
  stats.p999_ms = Ms(static_cast<double>(Percentile(latencies_ns, 99.9)));
  stats.max_ms = Ms(static_cast<double>(latencies_ns.back()));
  return stats;
}

RequestCost RequestCost::Of(const AttentionInputs& inputs, const AttendOptions& options) {
  RequestCost cost;
  cost.flops = inputs.Flops(options);
  const int64_t lse_bytes = options.return_lse ? inputs.LseElements() * 4 : 0;
  cost.tensor_bytes = static_cast<double>(inputs.InputBytes() + inputs.QBytes() + lse_bytes);
  return cost;
}

RequestCost RequestCost::SelfAttention(const Shape& shape) {
  RequestCost cost;
  cost.flops =
      AttentionProblem::SelfAttention(shape.batch, shape.seq_len, shape.num_heads, shape.head_dim)
          .Flops();
  cost.tensor_bytes = 4.0 * static_cast<double>(shape.NumElements()) * 2.0;
  return cost;
}

LevelSummary Summarize(const LevelRun& run, const Shape& shape) {
  return Summarize(run, RequestCost::SelfAttention(shape));
}

LevelSummary Summarize(const LevelRun& run, const RequestCost& cost) {
  LevelSummary s;
  s.mode = run.spec.mode;
  s.concurrency = run.spec.mode == LoadMode::kClosedLoop ? run.spec.concurrency : 0;
  s.target_rate = run.spec.mode == LoadMode::kOpenLoop ? run.spec.rate : 0;
  s.sent = static_cast<int64_t>(run.records.size());
  s.unsent = run.unsent_requests;

  const int64_t late_tolerance_ns = absl::ToInt64Nanoseconds(run.spec.late_tolerance);
  std::vector<int64_t> latencies, service;
  int64_t last_done = run.window_start_ns;
  int64_t last_sent = run.window_start_ns;
  PhaseBreakdown sums;  // nanoseconds while summing
  for (const RequestRecord& r : run.records) {
    last_done = std::max(last_done, r.done_ns);
    last_sent = std::max(last_sent, r.sent_ns);
    if (run.spec.mode == LoadMode::kOpenLoop && r.sent_ns - r.due_ns > late_tolerance_ns) ++s.late;
    if (r.code != absl::StatusCode::kOk) {
      ++s.failed;
      ++s.errors[absl::StatusCodeToString(r.code)];
      continue;
    }
    ++s.completed;
    s.streamed += r.streamed ? 1 : 0;
    latencies.push_back(r.done_ns - r.due_ns);
    service.push_back(r.done_ns - r.sent_ns);
    AddPhases(r, &sums);
  }
  if (s.sent > 0)
    s.late_percent = 100.0 * static_cast<double>(s.late) / static_cast<double>(s.sent);

  s.window_s = static_cast<double>(last_done - run.window_start_ns) / 1e9;
  const double send_span_s =
      static_cast<double>(std::max(run.send_stop_ns, last_sent) - run.window_start_ns) / 1e9;
  if (send_span_s > 0) s.send_rate = static_cast<double>(s.sent) / send_span_s;
  if (s.window_s > 0) {
    s.throughput_rps = static_cast<double>(s.completed) / s.window_s;
    s.tensor_gbps = s.throughput_rps * cost.tensor_bytes / 1e9;
    s.tflops = s.throughput_rps * cost.flops / 1e12;
  }
  s.latency = ComputeLatencyStats(std::move(latencies));
  s.service_latency = ComputeLatencyStats(std::move(service));
  if (s.completed > 0) s.phases = ScalePhases(sums, 1e-6 / static_cast<double>(s.completed));
  s.server_stats = StatsDelta(run);
  return s;
}

std::string LevelLabel(const LevelSummary& summary) {
  if (summary.mode == LoadMode::kClosedLoop) return absl::StrCat("c=", summary.concurrency);
  return absl::StrFormat("r=%g/s", summary.target_rate);
}

}  // namespace attn::loadgen
