// server/observability/metrics_sink.h
//
// MetricsSink: where the end of every Attend/AttendStream call goes besides
// the request log and Stats (RecordOutcome in request_log.h is the one
// caller). A sink sees one OutcomeSample per call, on the thread that ends
// the call (a gRPC or worker thread), so RecordOutcome must be thread-safe
// and must not block: no I/O, no locks held for long. The Prometheus
// exporter (prometheus_metrics.h) is the implementation the server uses;
// tests may add their own.
#ifndef ATTN_SERVER_OBSERVABILITY_METRICS_SINK_H_
#define ATTN_SERVER_OBSERVABILITY_METRICS_SINK_H_

#include <cstdint>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "core/job.h"

namespace attn::server {

// One finished call. The string views live only for the RecordOutcome call.
struct OutcomeSample {
  absl::string_view rpc;     // "Attend" or "AttendStream"
  absl::string_view kernel;  // the kernel's name; "" when the request did not decode
  absl::StatusCode code = absl::StatusCode::kOk;
  // Who ended a failed call (EndedBy in stats.h: "queue_full",
  // "client_cancel", ...); "" for OK.
  absl::string_view ended_by;
  // Phase times; complete only for OK calls.
  PhaseTimes times;
  // Bytes of the request's q, k and v and of the response's out and lse
  // (RequestSpec::InputBytes/OutputBytes); 0 when the request did not decode.
  int64_t bytes_in = 0;
  int64_t bytes_out = 0;
};

class MetricsSink {
 public:
  virtual ~MetricsSink() = default;
  virtual void RecordOutcome(const OutcomeSample& sample) = 0;
};

}  // namespace attn::server

#endif  // ATTN_SERVER_OBSERVABILITY_METRICS_SINK_H_
