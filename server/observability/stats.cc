#include "observability/stats.h"

#include "absl/time/clock.h"

namespace attn::server {
namespace {

void Add(std::atomic<int64_t>& counter, int64_t value) {
  counter.fetch_add(value, std::memory_order_relaxed);
}
int64_t Get(const std::atomic<int64_t>& counter) { return counter.load(std::memory_order_relaxed); }

}  // namespace

Stats::Stats() : start_(absl::Now()) {}

void Stats::RecordSuccess(const PhaseTimes& t, const TensorBytesMoved& bytes) {
  Add(ok_, 1);
  Add(bytes_in_, bytes.in);
  Add(bytes_out_, bytes.out);
  Add(region_bytes_in_, bytes.region_in);
  Add(region_bytes_out_, bytes.region_out);
  Add(receive_ns_, t.receive_ns);
  Add(decode_ns_, t.decode_ns);
  Add(queue_ns_, t.queue_ns);
  Add(h2d_ns_, t.h2d_ns);
  Add(kernel_ns_, t.kernel_ns);
  Add(d2h_ns_, t.d2h_ns);
  Add(total_ns_, t.total_ns);
}

void Stats::RecordFailure(FailureKind kind) {
  Add(failed_, 1);
  switch (kind) {
    case FailureKind::kQueueFull:
      Add(queue_full_, 1);
      break;
    case FailureKind::kDeadline:
      Add(deadline_, 1);
      break;
    case FailureKind::kCancelled:
      Add(cancelled_, 1);
      break;
    case FailureKind::kDrain:
      Add(drain_, 1);
      break;
    case FailureKind::kUploadTimeout:
      Add(upload_timeouts_, 1);
      break;
    case FailureKind::kOverBudget:
      Add(over_budget_, 1);
      break;
    case FailureKind::kOther:
      break;
  }
}

absl::string_view EndedBy(FailureKind kind, absl::StatusCode code) {
  switch (kind) {
    case FailureKind::kQueueFull:
      return "queue_full";
    case FailureKind::kDeadline:
      return "client_deadline";
    case FailureKind::kCancelled:
      return "client_cancel";
    case FailureKind::kDrain:
      return "server_drain";
    case FailureKind::kUploadTimeout:
      return "upload_timeout";
    case FailureKind::kOverBudget:
      return "over_budget";
    case FailureKind::kOther:
      break;
  }
  switch (code) {
    case absl::StatusCode::kInvalidArgument:
    case absl::StatusCode::kNotFound:
    case absl::StatusCode::kFailedPrecondition:
    case absl::StatusCode::kResourceExhausted:
    case absl::StatusCode::kOutOfRange:
    case absl::StatusCode::kUnauthenticated:
    case absl::StatusCode::kPermissionDenied:
      return "request";
    default:
      return "server";
  }
}

Stats::Snapshot Stats::Read() const {
  Snapshot s;
  s.uptime_ns = absl::ToInt64Nanoseconds(absl::Now() - start_);
  s.ok = Get(ok_);
  s.failed = Get(failed_);
  s.queue_full = Get(queue_full_);
  s.deadline = Get(deadline_);
  s.cancelled = Get(cancelled_);
  s.drain = Get(drain_);
  s.upload_timeouts = Get(upload_timeouts_);
  s.over_budget = Get(over_budget_);
  s.bytes = {Get(bytes_in_), Get(bytes_out_), Get(region_bytes_in_), Get(region_bytes_out_)};
  s.sums.receive_ns = Get(receive_ns_);
  s.sums.decode_ns = Get(decode_ns_);
  s.sums.queue_ns = Get(queue_ns_);
  s.sums.h2d_ns = Get(h2d_ns_);
  s.sums.kernel_ns = Get(kernel_ns_);
  s.sums.d2h_ns = Get(d2h_ns_);
  s.sums.total_ns = Get(total_ns_);
  return s;
}

}  // namespace attn::server
