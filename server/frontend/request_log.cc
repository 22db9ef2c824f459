#include "frontend/request_log.h"

#include <string>

#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/time/clock.h"
#include "core/log.h"
#include "frontend/tensor_codec.h"

namespace attn::server {
namespace {

std::string Micros(int64_t ns) { return absl::StrFormat("%.0f", ns / 1000.0); }

}  // namespace

FailureKind ClassifySchedulerStatus(const absl::Status& status) {
  switch (status.code()) {
    case absl::StatusCode::kResourceExhausted:
      return FailureKind::kQueueFull;
    case absl::StatusCode::kDeadlineExceeded:
      return FailureKind::kDeadline;
    case absl::StatusCode::kCancelled:
      return FailureKind::kCancelled;
    default:
      return FailureKind::kOther;
  }
}

// `deadline` is the call's arrival plus the client's timeout, so it falls a
// little after the client's own deadline (by the time the request's header
// took to arrive): a cancellation this close before it is that deadline.
constexpr absl::Duration kDeadlineSkew = absl::Milliseconds(100);

absl::Status AttributeEnd(const Runtime& runtime, const absl::Status& status,
                          absl::Time deadline, FailureKind* kind) {
  const absl::StatusCode code = status.code();
  if (code != absl::StatusCode::kCancelled && code != absl::StatusCode::kDeadlineExceeded) {
    *kind = ClassifySchedulerStatus(status);
    return status;
  }
  absl::string_view who;
  // The code the client saw: its own deadline ends the call as
  // DEADLINE_EXCEEDED there, whatever stopped the work here.
  absl::StatusCode seen = code;
  if (runtime.cancelling_calls()) {
    *kind = FailureKind::kDrain;
    who = "by the server: its drain timeout (--drain_timeout_s) passed";
  } else if (code == absl::StatusCode::kDeadlineExceeded ||
             absl::Now() >= deadline - kDeadlineSkew) {
    *kind = FailureKind::kDeadline;
    who = "by the client's deadline";
    seen = absl::StatusCode::kDeadlineExceeded;
  } else {
    *kind = FailureKind::kCancelled;
    who = "by the client";
  }
  return absl::Status(seen, absl::StrCat(status.message(), " (ended ", who, ")"));
}

void RecordOutcome(Runtime& runtime, const RequestOutcome& o) {
  const bool ok = o.status.ok();
  const absl::StatusCode code = o.status.code();
  // Tensor bytes in the messages; those in regions are counted apart.
  const int64_t bytes_in = o.job != nullptr    ? o.job->MessageInputBytes()
                           : o.spec != nullptr ? o.spec->InputBytes()
                                               : 0;
  const int64_t bytes_out = o.job != nullptr    ? o.job->MessageOutputBytes()
                            : o.spec != nullptr ? o.spec->OutputBytes()
                                                : 0;
  if (ok) {
    Stats::TensorBytesMoved moved{bytes_in, bytes_out, 0, 0};
    if (o.spec != nullptr) {
      moved.region_in = o.spec->InputBytes() - bytes_in;
      moved.region_out = o.spec->OutputBytes() - bytes_out;
    }
    runtime.stats().RecordSuccess(o.times, moved);
  } else {
    runtime.stats().RecordFailure(o.failure);
  }
  if (MetricsSink* sink = runtime.metrics_sink()) {
    OutcomeSample sample;
    sample.rpc = o.rpc;
    sample.kernel = o.spec != nullptr ? absl::string_view(o.spec->kernel_info().name) : "";
    sample.code = code;
    sample.ended_by = ok ? "" : EndedBy(o.failure, code);
    sample.times = o.times;
    sample.bytes_in = bytes_in;
    sample.bytes_out = bytes_out;
    sink->RecordOutcome(sample);
  }

  const LogLevel level = (code == absl::StatusCode::kInternal ||
                          code == absl::StatusCode::kUnknown || code == absl::StatusCode::kDataLoss)
                             ? LogLevel::kError
                             : runtime.options().request_log_level;
  if (!LogEnabled(level)) return;
  std::string line = absl::StrCat("request rpc=", o.rpc, " id=", o.request_id,
                                  " status=", absl::StatusCodeToString(code));
  if (o.spec != nullptr) {
    const AttentionProblem& p = o.spec->problem;
    absl::StrAppendFormat(&line, " dtype=%s shape=%dx%dx%dx%d", DTypeName(o.spec->dtype), p.batch,
                          p.seqlen_q, p.heads_q, p.head_dim);
    if (!p.IsSelfAttentionShape() || p.HasMask() || p.return_lse) {
      absl::StrAppend(&line, " problem=\"", p.ToString(), "\"");
    }
    absl::StrAppend(&line, " kernel=", o.spec->kernel_info().name);
  }
  if (ok) {
    const PhaseTimes& t = o.times;
    absl::StrAppend(&line, " device=\"", o.device, "\" receive_us=", Micros(t.receive_ns),
                    " decode_us=", Micros(t.decode_ns), " queue_us=", Micros(t.queue_ns),
                    " h2d_us=", Micros(t.h2d_ns), " kernel_us=", Micros(t.kernel_ns),
                    " d2h_us=", Micros(t.d2h_ns), " total_us=", Micros(t.total_ns));
    if (t.batch_size > 0) absl::StrAppend(&line, " batch_size=", t.batch_size);
    if (o.spec != nullptr) {
      absl::StrAppendFormat(&line, " tflops=%.3f", KernelTflops(*o.spec, t.kernel_ns));
    }
  } else {
    absl::StrAppend(&line, " ended_by=", EndedBy(o.failure, code), " message=\"",
                    absl::CEscape(o.status.message()), "\"");
  }
  Log(level, line);
}

}  // namespace attn::server
