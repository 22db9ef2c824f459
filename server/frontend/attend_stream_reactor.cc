#include "frontend/attend_stream_reactor.h"

#include <algorithm>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/time/clock.h"
#include "frontend/request_log.h"
#include "core/status_util.h"
#include "frontend/make_job.h"
#include "frontend/peer_identity.h"
#include "frontend/region_refs.h"
#include "frontend/tensor_codec.h"

namespace attn::server {
namespace {

namespace pb = ::attnserve::v1;

constexpr absl::string_view kRpc = "AttendStream";

}  // namespace

AttendStreamReactor::AttendStreamReactor(Runtime* runtime, CallGate* gate,
                                         grpc::CallbackServerContext* context)
    : runtime_(runtime), gate_(gate), context_(context), arrival_(absl::Now()) {
  runtime_->stream_watchdog().Add(&watch_);
  StartRead(&request_);
}

AttendStreamReactor::~AttendStreamReactor() {
  // First: after this the watchdog never calls Expire again.
  runtime_->stream_watchdog().Remove(&watch_);
  ReleaseInputs();
  ticket_.Release();
  gate_->Leave();
}

void AttendStreamReactor::ReleaseInputs() {
  inputs_.Release();
  if (spec_.has_value()) runtime_->admission().ReleaseStreamInputs(ticket_, spec_->InputBytes());
}

std::string AttendStreamReactor::Describe() const {
  return absl::StrCat("q, k, v and the outputs of problem ", spec_->problem.ToString());
}

void AttendStreamReactor::Expire(StreamWatchdog::Reason reason, absl::Duration limit) {
  absl::MutexLock lock(&mu_);
  const StreamWatchdog::Phase phase = watch_.phase();
  const std::string waited = absl::FormatDuration(limit);
  if (phase == StreamWatchdog::Phase::kUpload && !upload_ended_) {
    upload_ended_ = true;
    watch_.SetPhase(StreamWatchdog::Phase::kDone);
    absl::Status status;
    switch (reason) {
      case StreamWatchdog::Reason::kIdle:
        status = absl::DeadlineExceededError(absl::StrFormat(
            "AttendStream upload received no message for %s (--stream_idle_timeout_s); %s; its "
            "buffers are released",
            waited, inputs_.ReceivedText()));
        break;
      case StreamWatchdog::Reason::kUploadTimeout:
        status = absl::DeadlineExceededError(absl::StrFormat(
            "AttendStream upload not complete %s after the call started "
            "(--stream_upload_timeout_s); %s; its buffers are released",
            waited, inputs_.ReceivedText()));
        break;
      case StreamWatchdog::Reason::kDrain:
        status = absl::UnavailableError(absl::StrFormat(
            "attn_server is shutting down and this AttendStream upload had received nothing for "
            "%s (--drain_upload_idle_s); %s; retry on another server",
            waited, inputs_.ReceivedText()));
        break;
    }
    // The buffers go back now, not when gRPC gets round to OnDone.
    ReleaseInputs();
    ticket_.Release();
    Fail(status, reason == StreamWatchdog::Reason::kDrain ? FailureKind::kDrain
                                                          : FailureKind::kUploadTimeout);
  } else if (phase == StreamWatchdog::Phase::kSend && send_expired_.ok()) {
    watch_.SetPhase(StreamWatchdog::Phase::kDone);
    send_expired_ = absl::DeadlineExceededError(absl::StrFormat(
        "the client took no output chunk for %s (--stream_idle_timeout_s); the call was "
        "cancelled",
        waited));
    context_->TryCancel();  // OnWriteDone(false) finishes the call
  }
}

void AttendStreamReactor::FailEnded(const absl::Status& status) {
  FailureKind kind = FailureKind::kOther;
  const absl::Status ended =
      AttributeEnd(*runtime_, status, absl::FromChrono(context_->deadline()), &kind);
  Fail(ended, kind);
}

void AttendStreamReactor::OnReadDone(bool ok) {
  absl::MutexLock lock(&mu_);
  if (upload_ended_) return;  // the watchdog ended the upload
  watch_.Touch();
  if (!ok) {  // the client half-closed, or the call broke
    upload_ended_ = true;  // no read follows; the watchdog's upload limits no longer apply
    if (cancelled_.load(std::memory_order_acquire) || context_->IsCancelled()) {
      FailEnded(absl::CancelledError("cancelled while sending its tensors"));
    } else {
      OnInputComplete();
    }
    return;
  }
  absl::Status status;
  FailureKind kind = FailureKind::kOther;
  if (!spec_.has_value()) {
    status = request_.has_header()
                 ? OnHeader(request_.header(), &kind)
                 : absl::InvalidArgumentError(
                       "the first AttendStream message must be a header; got a chunk");
  } else if (request_.has_chunk()) {
    // The reservation follows the bytes that arrive (admission.h).
    status = inputs_.Add(request_.chunk(), [this](int64_t received) {
      return runtime_->admission().GrowStream(ticket_, received, spec_->InputBytes(), Describe());
    });
    if (status.code() == absl::StatusCode::kResourceExhausted) kind = FailureKind::kOverBudget;
  } else if (request_.has_header()) {
    status = absl::InvalidArgumentError("AttendStream got a second header; send it only once");
  } else {
    status = absl::InvalidArgumentError("AttendStream message has neither header nor chunk");
  }
  if (!status.ok()) {
    upload_ended_ = true;
    watch_.SetPhase(StreamWatchdog::Phase::kDone);
    Fail(status, kind);
    return;
  }
  StartRead(&request_);
}

absl::Status AttendStreamReactor::OnHeader(const pb::AttendRequest& header, FailureKind* kind) {
  absl::StatusOr<RequestSpec> spec =
      DecodeRequestHeader(header, runtime_->limits(), runtime_->catalog());
  request_id_ =
      (spec.ok() && !header.request_id().empty()) ? header.request_id() : runtime_->NextRequestId();
  if (!spec.ok()) return spec.status();
  spec->request_id = request_id_;
  if (HasRegionRefs(header)) {
    return absl::InvalidArgumentError(
        "AttendStream takes no region references (q_ref ... lse_ref); tensors in shared-memory "
        "regions need no stream: use Attend");
  }
  RETURN_IF_ERROR(StreamInputs::CheckHeaderHasNoTensors(header));
  // The first window of the upload (admission.h); the rest as it arrives.
  absl::StatusOr<AdmissionTicket> ticket = runtime_->admission().AdmitStream(
      PeerOf(*context_), spec->InputBytes(), spec->OutputBytes(),
      absl::StrCat("q, k, v and the outputs of problem ", spec->problem.ToString()));
  if (!ticket.ok()) {
    *kind = FailureKind::kOverBudget;
    return ticket.status();
  }
  ticket_ = *std::move(ticket);
  spec_ = *std::move(spec);
  inputs_.Start(*spec_);
  header_decoded_ = absl::Now();
  times_.decode_ns = ToNanos(header_decoded_ - arrival_);
  return absl::OkStatus();
}

void AttendStreamReactor::OnInputComplete() {
  if (!spec_.has_value()) {
    request_id_ = runtime_->NextRequestId();
    Fail(absl::InvalidArgumentError("AttendStream ended before its header"), FailureKind::kOther);
    return;
  }
  if (absl::Status complete = inputs_.CheckComplete(); !complete.ok()) {
    Fail(complete, FailureKind::kOther);
    return;
  }
  if (absl::Status outputs = runtime_->admission().AdmitStreamOutputs(
          ticket_, spec_->InputBytes(), spec_->OutputBytes(), Describe());
      !outputs.ok()) {
    Fail(outputs, FailureKind::kOverBudget);
    return;
  }
  times_.receive_ns = ToNanos(absl::Now() - header_decoded_);

  std::unique_ptr<Job> job = MakeJob(
      *spec_,
      {inputs_.View(InputTensor::kQ), inputs_.View(InputTensor::kK), inputs_.View(InputTensor::kV),
       TensorDestination::Host(&out_), TensorDestination::Host(&lse_)},
      arrival_, *context_, &cancelled_,
      [this](std::unique_ptr<Job> done_job, absl::Status status) {
        OnJobDone(std::move(done_job), std::move(status));
      });
  job->times = times_;
  // Queued or running: bounded by the scheduler and the deadline.
  watch_.SetPhase(StreamWatchdog::Phase::kCompute);
  absl::Status submitted = runtime_->scheduler().Submit(job);
  if (!submitted.ok()) FailEnded(submitted);
}

void AttendStreamReactor::OnJobDone(std::unique_ptr<Job> job, absl::Status status) {
  ReleaseInputs();
  if (status.ok() && cancelled_.load(std::memory_order_acquire)) {
    status = absl::CancelledError("the call was cancelled while its kernel ran");
  }
  if (!status.ok()) {
    FailEnded(status);
    return;
  }
  job->times.total_ns = ToNanos(absl::Now() - arrival_);
  times_ = job->times;
  device_ = job->device;
  EncodeResponseHeader(*job, runtime_->backend_name(), response_.mutable_header());
  out_sent_ = 0;
  lse_sent_ = 0;
  watch_.SetPhase(StreamWatchdog::Phase::kSend);
  StartWrite(&response_);
}

void AttendStreamReactor::OnWriteDone(bool ok) {
  if (!ok) {
    absl::Status expired;
    {
      absl::MutexLock lock(&mu_);
      expired = send_expired_;
    }
    if (!expired.ok()) {
      Fail(expired, FailureKind::kUploadTimeout);
    } else {
      FailEnded(absl::CancelledError("the call ended while the output was being sent"));
    }
    return;
  }
  watch_.Touch();
  WriteNextChunk();
}

void AttendStreamReactor::WriteNextChunk() {
  // The output's chunks, then (with return_lse) the LSE's.
  const bool out_left = out_sent_ < static_cast<int64_t>(out_.size());
  const std::string& data = out_left ? out_ : lse_;
  int64_t& sent = out_left ? out_sent_ : lse_sent_;
  const int64_t size =
      std::min(runtime_->options().stream_chunk_bytes, static_cast<int64_t>(data.size()) - sent);
  pb::TensorChunk* chunk = response_.mutable_chunk();
  chunk->set_tensor(out_left ? pb::TENSOR_OUT : pb::TENSOR_LSE);
  chunk->set_offset(sent);
  chunk->set_data(data.data() + sent, static_cast<size_t>(size));
  sent += size;
  if (out_sent_ < static_cast<int64_t>(out_.size()) ||
      lse_sent_ < static_cast<int64_t>(lse_.size())) {
    StartWrite(&response_);
    return;
  }
  RecordOutcome(*runtime_, {kRpc, request_id_, &*spec_, absl::OkStatus(), FailureKind::kOther,
                            times_, device_});
  watch_.SetPhase(StreamWatchdog::Phase::kDone);
  StartWriteAndFinish(&response_, grpc::WriteOptions(), grpc::Status::OK);
}

void AttendStreamReactor::Fail(const absl::Status& status, FailureKind kind) {
  watch_.SetPhase(StreamWatchdog::Phase::kDone);
  if (request_id_.empty()) request_id_ = runtime_->NextRequestId();
  PhaseTimes times = times_;
  times.total_ns = ToNanos(absl::Now() - arrival_);
  RecordOutcome(*runtime_, {kRpc, request_id_, spec_.has_value() ? &*spec_ : nullptr, status, kind,
                            times, ""});
  Finish(ToGrpcStatus(status));
}

}  // namespace attn::server
