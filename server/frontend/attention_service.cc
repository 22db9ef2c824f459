#include "frontend/attention_service.h"

#include <memory>
#include <string>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/time/clock.h"
#include "grpcpp/support/byte_buffer.h"
#include "grpcpp/support/proto_buffer_writer.h"
#include "frontend/sliced_request_reader.h"
#include "frontend/attend_stream_reactor.h"
#include "frontend/make_job.h"
#include "frontend/peer_identity.h"
#include "frontend/region_refs.h"
#include "frontend/region_service.h"
#include "frontend/response_writer.h"
#include "frontend/server_info.h"
#include "frontend/session_service.h"
#include "frontend/request_log.h"
#include "core/status_util.h"
#include "frontend/tensor_codec.h"

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

// One Attend call: parse, decode, submit, and (on a worker) fill the
// response. The method is registered raw (request and response as bytes) so
// that a body that is not an AttendRequest gets INVALID_ARGUMENT saying so;
// gRPC's generated handler answers such bodies UNIMPLEMENTED with no message.
class AttendReactor final : public grpc::ServerUnaryReactor {
 public:
  // `gate` has admitted this call; the reactor leaves it when done.
  AttendReactor(Runtime* runtime, CallGate* gate, grpc::CallbackServerContext* context,
                const grpc::ByteBuffer* request_bytes, grpc::ByteBuffer* response_bytes)
      : runtime_(runtime),
        gate_(gate),
        context_(context),
        request_bytes_(request_bytes),
        response_bytes_(response_bytes),
        response_(&response_message_),
        arrival_(absl::Now()) {}

  void Start() {
    const size_t body_bytes = request_bytes_->Length();
    // The tensors stay in the slices gRPC received them into; the executor
    // copies them from there once (sliced_request_reader.h).
    if (!reader_.Parse(*request_bytes_)) {
      reader_.Release();
      request_id_ = runtime_->NextRequestId();
      // A call that ended while its request was arriving leaves it
      // truncated: who ended it, not the bytes, is what it failed of.
      if (context_->IsCancelled() || absl::Now() >= absl::FromChrono(context_->deadline())) {
        FailEnded(absl::CancelledError(
                      absl::StrFormat("the call ended after %d bytes of its request", body_bytes)),
                  nullptr);
        return;
      }
      Fail(absl::InvalidArgumentError(absl::StrFormat(
               "the request body (%d bytes) is not a valid attnserve.v1.AttendRequest: protobuf "
               "parsing failed (malformed or truncated field, wrong wire type, or a string "
               "field that is not UTF-8)",
               body_bytes)),
           FailureKind::kOther, nullptr);
      return;
    }
    // The reader holds the slices now; the call's buffer lets go of them, so
    // they are freed as soon as the executor has copied the tensors.
    const_cast<grpc::ByteBuffer*>(request_bytes_)->Clear();
    const std::string& id = reader_.header().request_id();
    const std::array<int64_t, 3> inline_bytes = {reader_.q().size(), reader_.k().size(),
                                                 reader_.v().size()};
    absl::StatusOr<RequestSpec> spec = DecodeAttendRequest(
        reader_.header(), inline_bytes, runtime_->limits(), runtime_->catalog());
    // An invalid id is not logged as is; a valid one is echoed.
    request_id_ = (spec.ok() && !id.empty()) ? id : runtime_->NextRequestId();
    if (!spec.ok()) {
      Fail(spec.status(), FailureKind::kOther, nullptr);
      return;
    }
    spec->request_id = request_id_;
    // The outputs go into the response, which may be sent from an
    // executor's buffer, unless the request names regions for them.
    std::unique_ptr<Job> job = MakeJob(
        *std::move(spec),
        {reader_.q(), reader_.k(), reader_.v(),
         TensorDestination::Response(response_->mutable_out()),
         TensorDestination::Response(response_->mutable_lse())},
        arrival_, *context_, &cancelled_,
        [this](std::unique_ptr<Job> done_job, absl::Status status) {
          OnJobDone(std::move(done_job), std::move(status));
        });
    // Tensors in shared-memory regions: the job reads and writes them there,
    // and this call holds the regions until its job is done.
    if (absl::Status refs = ResolveRegionRefs(reader_.header(), inline_bytes, runtime_->regions(),
                                              job->spec, job.get(), &regions_);
        !refs.ok()) {
      Fail(refs, FailureKind::kOther, &job->spec, job.get());
      return;
    }
    // Inputs and outputs in the messages count against the server-wide
    // admitted bytes until the response has been sent (those in regions take
    // no server memory).
    absl::StatusOr<AdmissionTicket> ticket = runtime_->admission().AdmitCall(
        PeerOf(*context_), job->MessageInputBytes() + job->MessageOutputBytes(), "Attend",
        absl::StrCat("q, k, v and the outputs of problem ", job->spec.problem.ToString()));
    if (!ticket.ok()) {
      Fail(ticket.status(), FailureKind::kOverBudget, &job->spec, job.get());
      return;
    }
    ticket_ = *std::move(ticket);
    job->times.decode_ns = ToNanos(absl::Now() - arrival_);
    // From here on `this` may finish on a worker at any moment.
    absl::Status submitted = runtime_->scheduler().Submit(job);
    if (!submitted.ok()) FailEnded(submitted, job.get());
  }

  ~AttendReactor() override {
    ticket_.Release();
    gate_->Leave();
  }
  void OnCancel() override { cancelled_.store(true, std::memory_order_release); }
  void OnDone() override { delete this; }

 private:
  void OnJobDone(std::unique_ptr<Job> job, absl::Status status) {
    if (status.ok() && cancelled_.load(std::memory_order_acquire)) {
      status = absl::CancelledError("the call was cancelled while its kernel ran");
    }
    // The executor has copied the inputs: their slices go back to gRPC now,
    // not when the response has been sent; and it has written its outputs,
    // so the regions are free to be unregistered.
    reader_.Release();
    regions_ = RegionHolds();
    if (!status.ok()) {
      FailEnded(status, job.get());
      return;
    }
    job->times.total_ns = ToNanos(absl::Now() - arrival_);
    EncodeResponseHeader(*job, runtime_->backend_name(), response_);
    if (job->lent != nullptr) {
      // Sent from the executor's memory, not copied (response_writer.h).
      grpc::ByteBuffer lent = SerializeWithLentOutput(response_message_, std::move(job->lent));
      response_bytes_->Swap(&lent);
    } else {
      // Serialized once, into the call's response bytes; the message's own
      // copy goes at once.
      bool own_buffer = false;
      const grpc::Status serialized = grpc::SerializationTraits<pb::AttendResponse>::Serialize(
          response_message_, response_bytes_, &own_buffer);
      pb::AttendResponse().Swap(&response_message_);
      if (!serialized.ok()) {
        Fail(absl::InternalError("cannot serialize the AttendResponse: " +
                                 serialized.error_message()),
             FailureKind::kOther, &job->spec, job.get());
        return;
      }
    }
    RecordOutcome(*runtime_, {"Attend", request_id_, &job->spec, absl::OkStatus(),
                              FailureKind::kOther, job->times, job->device, job.get()});
    Finish(grpc::Status::OK);
  }

  // CANCELLED/DEADLINE_EXCEEDED with who ended the call.
  // `job` as far as the call got (null before it had one).
  void FailEnded(const absl::Status& status, const Job* job) {
    FailureKind kind = FailureKind::kOther;
    const absl::Status ended =
        AttributeEnd(*runtime_, status, absl::FromChrono(context_->deadline()), &kind);
    Fail(ended, kind, job != nullptr ? &job->spec : nullptr, job);
  }

  // `spec` and `job` as far as the call got (null before).
  void Fail(const absl::Status& status, FailureKind kind, const RequestSpec* spec,
            const Job* job = nullptr) {
    PhaseTimes times;
    times.total_ns = ToNanos(absl::Now() - arrival_);
    RecordOutcome(*runtime_, {"Attend", request_id_, spec, status, kind, times, "", job});
    Finish(ToGrpcStatus(status));
  }

  Runtime* const runtime_;
  CallGate* const gate_;
  grpc::CallbackServerContext* const context_;
  const grpc::ByteBuffer* const request_bytes_;
  grpc::ByteBuffer* const response_bytes_;
  AttendRequestReader reader_;
  RegionHolds regions_;
  pb::AttendResponse response_message_;
  pb::AttendResponse* const response_;
  const absl::Time arrival_;
  std::string request_id_;
  AdmissionTicket ticket_;  // the call's bytes, until the response has been sent
  std::atomic<bool> cancelled_{false};
};

grpc::ServerUnaryReactor* FinishNow(grpc::CallbackServerContext* context,
                                    const grpc::Status& status) {
  grpc::ServerUnaryReactor* reactor = context->DefaultReactor();
  reactor->Finish(status);
  return reactor;
}

// A streaming call refused before it began.
class RefusedStreamReactor final
    : public grpc::ServerBidiReactor<pb::AttendStreamRequest, pb::AttendStreamResponse> {
 public:
  explicit RefusedStreamReactor(grpc::Status status) { Finish(std::move(status)); }
  void OnDone() override { delete this; }
};

}  // namespace

grpc::ServerUnaryReactor* AttentionService::Attend(grpc::CallbackServerContext* context,
                                                   const grpc::ByteBuffer* request,
                                                   grpc::ByteBuffer* response) {
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

grpc::ServerWriteReactor<pb::HoldRegionsResponse>* AttentionService::HoldRegions(
    grpc::CallbackServerContext* context, const pb::HoldRegionsRequest*) {
  Runtime* rt = runtime();
  if (rt == nullptr) {
    class Refused final : public grpc::ServerWriteReactor<pb::HoldRegionsResponse> {
     public:
      Refused() { Finish(Starting()); }
      void OnDone() override { delete this; }
    };
    return new Refused();
  }
  return attn::server::HoldRegions(rt, context);
}

grpc::ServerUnaryReactor* AttentionService::RegisterRegion(
    grpc::CallbackServerContext* context, const pb::RegisterRegionRequest* request,
    pb::RegisterRegionResponse* response) {
  Runtime* rt = runtime();
  if (rt == nullptr) return FinishNow(context, Starting());
  return attn::server::RegisterRegion(rt, context, request, response);
}

grpc::ServerUnaryReactor* AttentionService::UnregisterRegion(
    grpc::CallbackServerContext* context, const pb::UnregisterRegionRequest* request,
    pb::UnregisterRegionResponse*) {
  Runtime* rt = runtime();
  if (rt == nullptr) return FinishNow(context, Starting());
  return attn::server::UnregisterRegion(rt, context, request);
}

grpc::ServerUnaryReactor* AttentionService::ListRegions(grpc::CallbackServerContext* context,
                                                        const pb::ListRegionsRequest* request,
                                                        pb::ListRegionsResponse* response) {
  Runtime* rt = runtime();
  if (rt == nullptr) return FinishNow(context, Starting());
  return attn::server::ListRegions(rt, context, request, response);
}

grpc::ServerWriteReactor<pb::HoldSessionsResponse>* AttentionService::HoldSessions(
    grpc::CallbackServerContext* context, const pb::HoldSessionsRequest*) {
  Runtime* rt = runtime();
  if (rt == nullptr) {
    class Refused final : public grpc::ServerWriteReactor<pb::HoldSessionsResponse> {
     public:
      Refused() { Finish(Starting()); }
      void OnDone() override { delete this; }
    };
    return new Refused();
  }
  return attn::server::HoldSessions(rt, context);
}

grpc::ServerUnaryReactor* AttentionService::OpenSession(grpc::CallbackServerContext* context,
                                                        const pb::OpenSessionRequest* request,
                                                        pb::OpenSessionResponse* response) {
  Runtime* rt = runtime();
  if (rt == nullptr) return FinishNow(context, Starting());
  return attn::server::OpenSession(rt, context, request, response);
}

grpc::ServerUnaryReactor* AttentionService::AttendSessions(grpc::CallbackServerContext* context,
                                                           const grpc::ByteBuffer* request,
                                                           grpc::ByteBuffer* response) {
  Runtime* rt = runtime();
  if (rt == nullptr) return FinishNow(context, Starting());
  if (!calls_.Enter()) return FinishNow(context, Draining());
  return attn::server::AttendSessions(rt, &calls_, context, request, response);
}

grpc::ServerUnaryReactor* AttentionService::TruncateSession(
    grpc::CallbackServerContext* context, const pb::TruncateSessionRequest* request,
    pb::TruncateSessionResponse* response) {
  Runtime* rt = runtime();
  if (rt == nullptr) return FinishNow(context, Starting());
  return attn::server::TruncateSession(rt, context, request, response);
}

grpc::ServerUnaryReactor* AttentionService::ForkSession(grpc::CallbackServerContext* context,
                                                        const pb::ForkSessionRequest* request,
                                                        pb::ForkSessionResponse* response) {
  Runtime* rt = runtime();
  if (rt == nullptr) return FinishNow(context, Starting());
  return attn::server::ForkSession(rt, context, request, response);
}

grpc::ServerUnaryReactor* AttentionService::CloseSession(grpc::CallbackServerContext* context,
                                                         const pb::CloseSessionRequest* request,
                                                         pb::CloseSessionResponse*) {
  Runtime* rt = runtime();
  if (rt == nullptr) return FinishNow(context, Starting());
  return attn::server::CloseSession(rt, context, request);
}

grpc::ServerUnaryReactor* AttentionService::ListSessions(grpc::CallbackServerContext* context,
                                                         const pb::ListSessionsRequest* request,
                                                         pb::ListSessionsResponse* response) {
  Runtime* rt = runtime();
  if (rt == nullptr) return FinishNow(context, Starting());
  return attn::server::ListSessions(rt, context, request, response);
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
    FillKernels(rt->catalog(), response);
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
    FillServerInfo(*rt, response);
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
    FillStats(*rt, response);
    reactor->Finish(grpc::Status::OK);
  }
  return reactor;
}

}  // namespace attn::server
