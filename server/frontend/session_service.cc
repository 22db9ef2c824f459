#include "frontend/session_service.h"

#include <cmath>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/time/clock.h"
#include "attn/validate.h"
#include "core/log.h"
#include "core/status_util.h"
#include "frontend/lease_reactor.h"
#include "frontend/make_job.h"
#include "frontend/peer_identity.h"
#include "frontend/request_log.h"
#include "frontend/response_writer.h"
#include "frontend/sliced_request_reader.h"
#include "frontend/tensor_codec.h"
#include "grpcpp/support/proto_buffer_writer.h"

namespace attn::server {
namespace {

namespace pb = ::attnserve::v1;

absl::Status MayUseSessions(const Runtime& runtime) {
  if (runtime.sessions() == nullptr) {
    return absl::FailedPreconditionError(runtime.sessions_off_reason());
  }
  return absl::OkStatus();
}

void SessionToProto(const Runtime& runtime, const SessionSnapshot& s, pb::SessionInfo* proto) {
  proto->set_session_id(s.session_id);
  pb::SessionConfig* c = proto->mutable_config();
  const SessionGeometry& g = s.geometry;
  c->set_dtype(ToProto(g.dtype));
  c->set_num_layers(static_cast<int32_t>(g.num_layers));
  c->set_num_heads(static_cast<int32_t>(g.heads_q));
  c->set_kv_num_heads(static_cast<int32_t>(g.heads_kv));
  c->set_head_dim(static_cast<int32_t>(g.head_dim));
  if (g.softmax_scale > 0) c->set_softmax_scale(g.softmax_scale);
  if (g.window_left >= 0) c->set_window_left(g.window_left);
  c->set_max_tokens(g.max_tokens);
  c->set_reserve(g.reserve);
  for (int64_t t : s.layer_tokens) proto->add_layer_tokens(t);
  proto->set_page_tokens(s.page_tokens);
  proto->set_pages(s.pages);
  proto->set_device(runtime.session_pool().device);
  proto->set_busy(s.busy);
}

// The config as a geometry the default kernel can run, or INVALID_ARGUMENT
// naming the field.
absl::StatusOr<SessionGeometry> GeometryOf(const Runtime& runtime, const pb::SessionConfig& c) {
  SessionGeometry g;
  switch (c.dtype()) {
    case pb::DTYPE_FLOAT16: g.dtype = DType::kFloat16; break;
    case pb::DTYPE_BFLOAT16: g.dtype = DType::kBFloat16; break;
    default:
      return absl::InvalidArgumentError(absl::StrFormat(
          "config.dtype is %d; it must be DTYPE_FLOAT16 or DTYPE_BFLOAT16", c.dtype()));
  }
  g.num_layers = c.num_layers();
  g.heads_q = c.num_heads();
  g.heads_kv = c.kv_num_heads() == 0 ? c.num_heads() : c.kv_num_heads();
  g.head_dim = c.head_dim();
  if (c.has_softmax_scale()) {
    if (!(std::isfinite(c.softmax_scale()) && c.softmax_scale() > 0)) {
      return absl::InvalidArgumentError(absl::StrFormat(
          "config.softmax_scale is %g; it must be finite and > 0", c.softmax_scale()));
    }
    g.softmax_scale = c.softmax_scale();
  }
  g.window_left = c.has_window_left() ? c.window_left() : -1;
  g.max_tokens = c.max_tokens();
  g.reserve = c.reserve();
  // The default kernel must take a step of this geometry: check a one-token
  // step over one page now, not at the first step.
  const KernelInfo& kernel = runtime.catalog().default_kernel().info();
  if (g.head_dim < 1) {
    return absl::InvalidArgumentError(
        absl::StrFormat("config.head_dim is %d; it must be >= 1", g.head_dim));
  }
  if (absl::Status ok = runtime.sessions()->CheckGeometry(g); !ok.ok()) return ok;
  StepPlan probe;
  probe.geometry = g;
  probe.page_tokens = std::max<int64_t>(1, PageTokens(runtime.session_pool().page_bytes,
                                                      g.RowBytes()));
  probe.max_pages_per_seq = 1;
  probe.total_tokens = 1;
  probe.cu_seqlens_q = {0, 1};
  probe.cache_seqlens = {0};
  const AttentionProblem problem = StepProblem(probe, 1, false);
  if (absl::Status ok = ValidateProblem(problem, kernel); !ok.ok()) {
    return absl::InvalidArgumentError(
        absl::StrCat("config: the server's kernel cannot run this session: ", ok.message()));
  }
  return g;
}

// One AttendSessions call, registered raw as Attend is: the request read
// with its tensors left in the received slices, the response sent from the
// executor's lent output when it lent one.
class StepReactor final : public grpc::ServerUnaryReactor {
 public:
  StepReactor(Runtime* runtime, CallGate* gate, grpc::CallbackServerContext* context,
              const grpc::ByteBuffer* request_bytes, grpc::ByteBuffer* response_bytes)
      : runtime_(runtime),
        gate_(gate),
        context_(context),
        request_bytes_(request_bytes),
        response_bytes_(response_bytes),
        arrival_(absl::Now()) {}
  ~StepReactor() override {
    if (plan_.has_value()) runtime_->sessions()->EndStep(*plan_, false);
    ticket_.Release();
    gate_->Leave();
  }
  void OnCancel() override { cancelled_.store(true, std::memory_order_release); }
  void OnDone() override { delete this; }

  void Start() {
    const size_t body_bytes = request_bytes_->Length();
    if (!reader_.Parse(*request_bytes_)) {
      reader_.Release();
      request_id_ = runtime_->NextRequestId();
      // A call that ended while its request was arriving leaves it
      // truncated: who ended it, not the bytes, is what it failed of.
      if (context_->IsCancelled() || absl::Now() >= absl::FromChrono(context_->deadline())) {
        return Fail(absl::CancelledError(absl::StrFormat(
                        "the call ended after %d bytes of its request", body_bytes)),
                    nullptr);
      }
      return Fail(absl::InvalidArgumentError(absl::StrFormat(
                      "the request body (%d bytes) is not a valid "
                      "attnserve.v1.AttendSessionsRequest: protobuf parsing failed (malformed or "
                      "truncated field, wrong wire type, or a string field that is not UTF-8)",
                      body_bytes)),
                  nullptr);
    }
    // The reader holds the slices now; they go back to gRPC once the
    // executor has copied the tensors.
    const_cast<grpc::ByteBuffer*>(request_bytes_)->Clear();
    const pb::AttendSessionsRequest& request = reader_.header();
    request_id_ = request.request_id().empty() || request.request_id().size() > 128
                      ? runtime_->NextRequestId()
                      : request.request_id();
    if (absl::Status ok = MayUseSessions(*runtime_); !ok.ok()) return Fail(ok, nullptr);
    std::vector<StepEntry> steps;
    for (const pb::SessionStep& s : request.steps()) steps.push_back({s.session_id(), s.tokens()});
    absl::StatusOr<StepPlan> plan = runtime_->sessions()->BeginStep(
        request.lease_id(), PeerOf(*context_), request.layer(), steps);
    if (!plan.ok()) return Fail(plan.status(), nullptr);
    plan_ = *std::move(plan);
    RequestSpec spec = StepSpec(*plan_, runtime_->session_pool(), request.return_lse());
    spec.request_id = request_id_;
    spec.kernel = &runtime_->catalog().default_kernel();
    if (absl::Status ok = ValidateProblem(spec.problem, spec.kernel_info()); !ok.ok()) {
      return Fail(ok, nullptr);
    }
    // The new tokens' q (and o; k and v have no more heads) must fit the
    // executors' buffers, as an Attend call's tensors do.
    const SessionGeometry& g = plan_->geometry;
    if (absl::Status ok = CheckTokenLimit(
            "q", absl::StrFormat("[%d, %d, %d]", plan_->total_tokens, g.heads_q, g.head_dim),
            plan_->total_tokens, g.heads_q, g.head_dim, runtime_->limits());
        !ok.ok()) {
      return Fail(ok, nullptr);
    }
    const std::pair<const char*, int64_t> sizes[] = {{"q", spec.QBytes()},
                                                     {"k", spec.KVBytes()},
                                                     {"v", spec.KVBytes()}};
    const TensorSource* fields[] = {&reader_.q(), &reader_.k(), &reader_.v()};
    for (int i = 0; i < 3; ++i) {
      if (fields[i]->size() != sizes[i].second) {
        return Fail(absl::InvalidArgumentError(absl::StrFormat(
                        "%s has %d bytes; the steps' %d new tokens need %d", sizes[i].first,
                        fields[i]->size(), plan_->total_tokens, sizes[i].second)),
                    nullptr);
      }
    }
    // The outputs go into the response, which may be sent from an
    // executor's buffer.
    std::unique_ptr<Job> job = MakeJob(
        std::move(spec),
        {reader_.q(), reader_.k(), reader_.v(),
         TensorDestination::Response(response_.mutable_out()),
         TensorDestination::Response(response_.mutable_lse())},
        arrival_, *context_, &cancelled_,
        [this](std::unique_ptr<Job> done_job, absl::Status status) {
          OnJobDone(std::move(done_job), std::move(status));
        });
    absl::StatusOr<AdmissionTicket> ticket = runtime_->admission().AdmitCall(
        PeerOf(*context_), job->MessageInputBytes() + job->MessageOutputBytes(),
        "AttendSessions", absl::StrCat("q, k, v and the outputs of ", job->spec.problem.ToString()));
    if (!ticket.ok()) return Fail(ticket.status(), job.get());
    ticket_ = *std::move(ticket);
    job->times.decode_ns = ToNanos(absl::Now() - arrival_);
    absl::Status submitted = runtime_->scheduler().Submit(job);
    if (!submitted.ok()) Fail(submitted, job.get());
  }

 private:
  void OnJobDone(std::unique_ptr<Job> job, absl::Status status) {
    if (status.ok() && cancelled_.load(std::memory_order_acquire)) {
      status = absl::CancelledError("the call was cancelled while its kernel ran");
    }
    // The executor has copied the inputs: their slices go back to gRPC now.
    reader_.Release();
    // The kernel has written the cache: commit (or give back) before the
    // client can send the next step.
    runtime_->sessions()->EndStep(*plan_, status.ok());
    if (!status.ok()) return Fail(status, job.get());
    for (size_t i = 0; i < plan_->cache_seqlens.size(); ++i) {
      response_.add_layer_tokens(plan_->cache_seqlens[i] + plan_->cu_seqlens_q[i + 1] -
                                 plan_->cu_seqlens_q[i]);
    }
    plan_.reset();
    job->times.total_ns = ToNanos(absl::Now() - arrival_);
    response_.set_request_id(request_id_);
    ToProto(job->times, response_.mutable_timing());
    response_.set_kernel(job->spec.kernel_info().name);
    response_.set_backend(std::string(runtime_->backend_name()));
    response_.set_device(job->device);
    if (job->lent != nullptr) {
      // Sent from the executor's memory, not copied (response_writer.h).
      grpc::ByteBuffer lent = SerializeWithLentOutput(response_, std::move(job->lent));
      response_bytes_->Swap(&lent);
    } else {
      bool own_buffer = false;
      const grpc::Status serialized =
          grpc::SerializationTraits<pb::AttendSessionsResponse>::Serialize(
              response_, response_bytes_, &own_buffer);
      pb::AttendSessionsResponse().Swap(&response_);
      if (!serialized.ok()) {
        return Fail(absl::InternalError("cannot serialize the AttendSessionsResponse: " +
                                        serialized.error_message()),
                    job.get());
      }
    }
    RecordOutcome(*runtime_, {"AttendSessions", request_id_, &job->spec, absl::OkStatus(),
                              FailureKind::kOther, job->times, job->device, job.get()});
    Finish(grpc::Status::OK);
  }

  void Fail(const absl::Status& status, const Job* job) {
    // Give the step's pages back and its sessions free before answering: the
    // client's next call on them may arrive as soon as it has the answer
    // (EndStep is idempotent; the destructor's would be too late).
    if (plan_.has_value()) runtime_->sessions()->EndStep(*plan_, false);
    reader_.Release();
    PhaseTimes times;
    times.total_ns = ToNanos(absl::Now() - arrival_);
    FailureKind kind = FailureKind::kOther;
    absl::Status reported = status;
    if (job != nullptr) {
      reported = AttributeEnd(*runtime_, status, absl::FromChrono(context_->deadline()), &kind);
    }
    RecordOutcome(*runtime_, {"AttendSessions", request_id_, job != nullptr ? &job->spec : nullptr,
                              reported, kind, times, "", job});
    Finish(ToGrpcStatus(reported));
  }

  Runtime* const runtime_;
  CallGate* const gate_;
  grpc::CallbackServerContext* const context_;
  const grpc::ByteBuffer* const request_bytes_;
  grpc::ByteBuffer* const response_bytes_;
  StepRequestReader reader_;
  pb::AttendSessionsResponse response_;  // out and lse empty when the output was lent
  const absl::Time arrival_;
  std::string request_id_;
  std::optional<StepPlan> plan_;  // from BeginStep until EndStep
  AdmissionTicket ticket_;
  std::atomic<bool> cancelled_{false};
};

}  // namespace

grpc::ServerWriteReactor<pb::HoldSessionsResponse>* HoldSessions(
    Runtime* runtime, grpc::CallbackServerContext* context) {
  if (absl::Status ok = MayUseSessions(*runtime); !ok.ok()) {
    return new RefusedLease<pb::HoldSessionsResponse>(ok);
  }
  // The lease's sessions end with the call.
  SessionRegistry* registry = runtime->sessions();
  const std::string owner = PeerOf(*context);
  const std::string id = registry->OpenLease(owner);
  return new LeaseReactor<pb::HoldSessionsResponse>("session", id, owner, [registry, id]() {
    return absl::StrCat(registry->EndLease(id), " sessions closed");
  });
}

grpc::ServerUnaryReactor* OpenSession(Runtime* runtime, grpc::CallbackServerContext* context,
                                      const pb::OpenSessionRequest* request,
                                      pb::OpenSessionResponse* response) {
  if (absl::Status ok = MayUseSessions(*runtime); !ok.ok()) return Finished(context, ok);
  absl::StatusOr<SessionGeometry> geometry = GeometryOf(*runtime, request->config());
  if (!geometry.ok()) return Finished(context, geometry.status());
  absl::StatusOr<SessionSnapshot> opened =
      runtime->sessions()->Open(request->lease_id(), PeerOf(*context), *geometry);
  if (!opened.ok()) return Finished(context, opened.status());
  SessionToProto(*runtime, *opened, response->mutable_session());
  return Finished(context, absl::OkStatus());
}

grpc::ServerUnaryReactor* AttendSessions(Runtime* runtime, CallGate* gate,
                                         grpc::CallbackServerContext* context,
                                         const grpc::ByteBuffer* request,
                                         grpc::ByteBuffer* response) {
  auto* reactor = new StepReactor(runtime, gate, context, request, response);
  reactor->Start();
  return reactor;
}

grpc::ServerUnaryReactor* TruncateSession(Runtime* runtime, grpc::CallbackServerContext* context,
                                          const pb::TruncateSessionRequest* request,
                                          pb::TruncateSessionResponse* response) {
  if (absl::Status ok = MayUseSessions(*runtime); !ok.ok()) return Finished(context, ok);
  absl::StatusOr<SessionSnapshot> s = runtime->sessions()->Truncate(
      request->lease_id(), PeerOf(*context), request->session_id(), request->tokens());
  if (!s.ok()) return Finished(context, s.status());
  SessionToProto(*runtime, *s, response->mutable_session());
  return Finished(context, absl::OkStatus());
}

grpc::ServerUnaryReactor* ForkSession(Runtime* runtime, grpc::CallbackServerContext* context,
                                      const pb::ForkSessionRequest* request,
                                      pb::ForkSessionResponse* response) {
  if (absl::Status ok = MayUseSessions(*runtime); !ok.ok()) return Finished(context, ok);
  absl::StatusOr<SessionSnapshot> s =
      runtime->sessions()->Fork(request->lease_id(), PeerOf(*context), request->session_id());
  if (!s.ok()) return Finished(context, s.status());
  SessionToProto(*runtime, *s, response->mutable_session());
  return Finished(context, absl::OkStatus());
}

grpc::ServerUnaryReactor* CloseSession(Runtime* runtime, grpc::CallbackServerContext* context,
                                       const pb::CloseSessionRequest* request) {
  if (absl::Status ok = MayUseSessions(*runtime); !ok.ok()) return Finished(context, ok);
  return Finished(context, runtime->sessions()->Close(request->lease_id(), PeerOf(*context),
                                                      request->session_id()));
}

grpc::ServerUnaryReactor* ListSessions(Runtime* runtime, grpc::CallbackServerContext* context,
                                       const pb::ListSessionsRequest* request,
                                       pb::ListSessionsResponse* response) {
  if (absl::Status ok = MayUseSessions(*runtime); !ok.ok()) return Finished(context, ok);
  absl::StatusOr<std::vector<SessionSnapshot>> list =
      runtime->sessions()->List(request->lease_id(), PeerOf(*context));
  if (!list.ok()) return Finished(context, list.status());
  for (const SessionSnapshot& s : *list) SessionToProto(*runtime, s, response->add_sessions());
  return Finished(context, absl::OkStatus());
}

}  // namespace attn::server
