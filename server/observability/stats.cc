#include "observability/stats.h"

#include "absl/time/clock.h"
#include "attnserve/v1/attention.pb.h"

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

void Stats::Fill(int64_t in_flight, int64_t queued, attnserve::v1::ServerStats* proto) const {
  proto->set_uptime_ns(absl::ToInt64Nanoseconds(absl::Now() - start_));
  proto->set_requests_ok(Get(ok_));
  proto->set_requests_failed(Get(failed_));
  proto->set_rejected_queue_full(Get(queue_full_));
  proto->set_rejected_deadline(Get(deadline_));
  proto->set_rejected_cancelled(Get(cancelled_));
  proto->set_cancelled_by_drain(Get(drain_));
  proto->set_upload_timeouts(Get(upload_timeouts_));
  proto->set_rejected_over_budget(Get(over_budget_));
  proto->set_in_flight(in_flight);
  proto->set_queued(queued);
  proto->set_bytes_in(Get(bytes_in_));
  proto->set_bytes_out(Get(bytes_out_));
  proto->set_region_bytes_in(Get(region_bytes_in_));
  proto->set_region_bytes_out(Get(region_bytes_out_));
  attnserve::v1::Timing* sum = proto->mutable_cumulative();
  sum->set_receive_ns(Get(receive_ns_));
  sum->set_decode_ns(Get(decode_ns_));
  sum->set_queue_ns(Get(queue_ns_));
  sum->set_h2d_ns(Get(h2d_ns_));
  sum->set_kernel_ns(Get(kernel_ns_));
  sum->set_d2h_ns(Get(d2h_ns_));
  sum->set_total_ns(Get(total_ns_));
}

}  // namespace attn::server
