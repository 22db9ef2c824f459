#include "attention_service.h"

#include <memory>
#include <string>
#include <utility>

#include "absl/time/clock.h"
#include "attend_stream_reactor.h"
#include "request_log.h"
#include "status_util.h"
#include "tensor_codec.h"

namespace attn::server {
namespace {

namespace pb = ::attnserve::v1;

grpc::Status Starting() {
  return grpc::Status(grpc::StatusCode::UNAVAILABLE,
                      "attn_server is starting; retry when health reports SERVING");
}

grpc::Status Draining() {
  return grpc::Status(grpc::StatusCode::UNAVAILABLE,
                      "attn_server is shutting down; retry on another server");
}

// One Attend call: decode, submit, and (on a worker) fill the response.
class AttendReactor final : public grpc::ServerUnaryReactor {
 public:
  // `gate` has admitted this call; the reactor leaves it when done.
  AttendReactor(Runtime* runtime, CallGate* gate, grpc::CallbackServerContext* context,
                const pb::AttendRequest* request, pb::AttendResponse* response)
      : runtime_(runtime),
        gate_(gate),
        context_(context),
        request_(request),
        response_(response),
        arrival_(absl::Now()) {}

  void Start() {
    const std::string& id = request_->request_id();
    absl::StatusOr<RequestSpec> spec =
        DecodeAttendRequest(*request_, runtime_->limits(), runtime_->catalog());
    // An invalid id is not logged as is; a valid one is echoed.
    request_id_ = (spec.ok() && !id.empty()) ? id : runtime_->NextRequestId();
    if (!spec.ok()) {
      Fail(spec.status(), FailureKind::kOther, nullptr);
      return;
    }
    spec->request_id = request_id_;

    auto job = std::make_unique<Job>();
    job->spec = *std::move(spec);
    job->q = request_->q();
    job->k = request_->k();
    job->v = request_->v();
    job->out = response_->mutable_out();
    if (job->spec.problem.return_lse) job->lse = response_->mutable_lse();
    job->arrival = arrival_;
    job->deadline = absl::FromChrono(context_->deadline());
    job->cancelled = &cancelled_;
    job->done = [this](std::unique_ptr<Job> done_job, absl::Status status) {
      OnJobDone(std::move(done_job), std::move(status));
    };
    job->times.decode_ns = ToNanos(absl::Now() - arrival_);
    // From here on `this` may finish on a worker at any moment.
    absl::Status submitted = runtime_->scheduler().Submit(job);
    if (!submitted.ok()) Fail(submitted, ClassifySchedulerStatus(submitted), &job->spec);
  }

  ~AttendReactor() override { gate_->Leave(); }
  void OnCancel() override { cancelled_.store(true, std::memory_order_release); }
  void OnDone() override { delete this; }

 private:
  void OnJobDone(std::unique_ptr<Job> job, absl::Status status) {
    if (status.ok() && cancelled_.load(std::memory_order_acquire)) {
      status = absl::CancelledError(
          "the call was cancelled while its kernel ran (client gone, or the server's drain "
          "timeout passed)");
    }
    if (!status.ok()) {
      Fail(status, ClassifySchedulerStatus(status), &job->spec);
      return;
    }
    job->times.total_ns = ToNanos(absl::Now() - arrival_);
    EncodeResponseHeader(job->spec, job->times, runtime_->backend_name(), job->device, response_);
    RecordOutcome(*runtime_, {"Attend", request_id_, &job->spec, absl::OkStatus(),
                              FailureKind::kOther, job->times, job->device});
    Finish(grpc::Status::OK);
  }

  void Fail(const absl::Status& status, FailureKind kind, const RequestSpec* spec) {
    PhaseTimes times;
    times.total_ns = ToNanos(absl::Now() - arrival_);
    RecordOutcome(*runtime_, {"Attend", request_id_, spec, status, kind, times, ""});
    Finish(ToGrpcStatus(status));
  }

  Runtime* const runtime_;
  CallGate* const gate_;
  grpc::CallbackServerContext* const context_;
  const pb::AttendRequest* const request_;
  pb::AttendResponse* const response_;
  const absl::Time arrival_;
  std::string request_id_;
  std::atomic<bool> cancelled_{false};
};

// A streaming call refused before it began.
class RefusedStreamReactor final
    : public grpc::ServerBidiReactor<pb::AttendStreamRequest, pb::AttendStreamResponse> {
 public:
  explicit RefusedStreamReactor(grpc::Status status) { Finish(std::move(status)); }
  void OnDone() override { delete this; }
};

}  // namespace

grpc::ServerUnaryReactor* AttentionService::Attend(grpc::CallbackServerContext* context,
                                                   const pb::AttendRequest* request,
                                                   pb::AttendResponse* response) {
  Runtime* rt = runtime();
  if (rt == nullptr || !calls_.Enter()) {
    grpc::ServerUnaryReactor* reactor = context->DefaultReactor();
    reactor->Finish(rt == nullptr ? Starting() : Draining());
    return reactor;
  }
  auto* reactor = new AttendReactor(rt, &calls_, context, request, response);
  reactor->Start();
  return reactor;
}

grpc::ServerBidiReactor<pb::AttendStreamRequest, pb::AttendStreamResponse>*
AttentionService::AttendStream(grpc::CallbackServerContext* context) {
  Runtime* rt = runtime();
  if (rt == nullptr) return new RefusedStreamReactor(Starting());
  if (!calls_.Enter()) return new RefusedStreamReactor(Draining());
  return new AttendStreamReactor(rt, &calls_, context);
}

grpc::ServerUnaryReactor* AttentionService::ListKernels(grpc::CallbackServerContext* context,
                                                        const pb::ListKernelsRequest*,
                                                        pb::ListKernelsResponse* response) {
  grpc::ServerUnaryReactor* reactor = context->DefaultReactor();
  Runtime* rt = runtime();
  if (rt == nullptr) {
    reactor->Finish(Starting());
  } else {
    rt->FillKernels(response);
    reactor->Finish(grpc::Status::OK);
  }
  return reactor;
}

grpc::ServerUnaryReactor* AttentionService::GetServerInfo(grpc::CallbackServerContext* context,
                                                          const pb::GetServerInfoRequest*,
                                                          pb::ServerInfo* response) {
  grpc::ServerUnaryReactor* reactor = context->DefaultReactor();
  Runtime* rt = runtime();
  if (rt == nullptr) {
    reactor->Finish(Starting());
  } else {
    rt->FillServerInfo(response);
    reactor->Finish(grpc::Status::OK);
  }
  return reactor;
}

grpc::ServerUnaryReactor* AttentionService::GetStats(grpc::CallbackServerContext* context,
                                                     const pb::GetStatsRequest*,
                                                     pb::ServerStats* response) {
  grpc::ServerUnaryReactor* reactor = context->DefaultReactor();
  Runtime* rt = runtime();
  if (rt == nullptr) {
    reactor->Finish(Starting());
  } else {
    rt->FillStats(response);
    reactor->Finish(grpc::Status::OK);
  }
  return reactor;
}

}  // namespace attn::server
