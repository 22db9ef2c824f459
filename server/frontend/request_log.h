// server/observability/request_log.h
//
// The end of every Attend/AttendStream call, success or not: one structured
// log line, the matching counters and the metrics sink (metrics_sink.h).
//
//   I request rpc=Attend id=4f1c2a9e-17 status=OK dtype=bf16 shape=1x128x4x64
//     kernel=cpu_reference device="cpu (2 threads)" receive_us=0 decode_us=9
//     queue_us=2 h2d_us=0 kernel_us=812 d2h_us=0 total_us=840 tflops=0.010
//
// (one line in the log; shape is batch x seq_len x num_heads x head_dim).
// Beyond non-causal self-attention, problem="[B=2, Sq=..., causal, lse]"
// follows the shape. Failures carry code and message instead of
// timings, and ended_by= saying who ended the call (see EndedBy in
// stats.h). Logged at options.request_log_level, or at error for
// INTERNAL/UNKNOWN/DATA_LOSS.
#ifndef ATTN_SERVER_REQUEST_LOG_H_
#define ATTN_SERVER_REQUEST_LOG_H_

#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "core/job.h"
#include "runtime/runtime.h"
#include "observability/stats.h"

namespace attn::server {

// How a status from the scheduler (Submit or a job's completion) counts.
FailureKind ClassifySchedulerStatus(const absl::Status& status);

// Who ended a call that is CANCELLED or DEADLINE_EXCEEDED (the scheduler
// dropped it, the CPU kernel stopped, gRPC cancelled it): the server's drain
// timeout when the server is cancelling its calls, the client's deadline
// when it has passed (or is less than 100 ms away: the client's own came
// first), else the client. Other statuses are classified as
// ClassifySchedulerStatus does. Returns the status with who ended the call
// appended to its message, and sets *kind; a call the client's deadline
// ended is DEADLINE_EXCEEDED, the code that client saw.
absl::Status AttributeEnd(const Runtime& runtime, const absl::Status& status,
                          absl::Time deadline, FailureKind* kind);

struct RequestOutcome {
  absl::string_view rpc;  // "Attend" or "AttendStream"
  absl::string_view request_id;
  const RequestSpec* spec = nullptr;  // null when the request did not decode
  absl::Status status;
  FailureKind failure = FailureKind::kOther;  // for a non-OK status
  PhaseTimes times;
  absl::string_view device;
  // The call's job once it has one: which tensors were in regions. Without
  // one every tensor of `spec` counts as in the messages.
  const Job* job = nullptr;
};

// Logs `outcome`, counts it in runtime.stats() and hands it to
// runtime.metrics_sink() when there is one.
void RecordOutcome(Runtime& runtime, const RequestOutcome& outcome);

}  // namespace attn::server

#endif  // ATTN_SERVER_REQUEST_LOG_H_
