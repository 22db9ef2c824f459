#include "lease.h"

#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "status_util.h"

namespace attn::internal {

namespace pb = ::attnserve::v1;

const char* LeaseRpc(LeaseKind kind) {
  return kind == LeaseKind::kRegions ? "HoldRegions" : "HoldSessions";
}

// What Lease needs of the call, whichever Hold RPC it is.
class Lease::Call {
 public:
  virtual ~Call() = default;
  explicit Call(std::unique_ptr<grpc::ClientContext> context, const char* rpc)
      : context_(std::move(context)), rpc_(rpc) {}
  grpc::ClientContext* context() { return context_.get(); }

  // The lease id, or the call's status if it ended first.
  absl::StatusOr<std::string> WaitForId(absl::Duration timeout) {
    absl::MutexLock lock(&mu_);
    auto ready = [this]() ABSL_SHARED_LOCKS_REQUIRED(mu_) { return got_id_ || done_; };
    mu_.AwaitWithTimeout(absl::Condition(&ready), timeout);
    if (got_id_) return id_;
    if (done_) return FromGrpcStatus(status_, rpc_, "");
    return absl::DeadlineExceededError(
        absl::StrCat(rpc_, ": no lease id within ", absl::FormatDuration(timeout)));
  }
  void WaitDone() {
    absl::MutexLock lock(&mu_);
    mu_.Await(absl::Condition(&done_));
  }
  bool done() const {
    absl::MutexLock lock(&mu_);
    return done_;
  }

 protected:
  // The first message's lease id: true when it is the first.
  bool GotId(const std::string& id) {
    absl::MutexLock lock(&mu_);
    if (got_id_) return false;
    got_id_ = true;
    id_ = id;
    return true;
  }
  void Done(const grpc::Status& status) {
    absl::MutexLock lock(&mu_);
    status_ = status;
    done_ = true;
  }

 private:
  std::unique_ptr<grpc::ClientContext> context_;
  const char* const rpc_;
  mutable absl::Mutex mu_;
  bool got_id_ ABSL_GUARDED_BY(mu_) = false;
  std::string id_ ABSL_GUARDED_BY(mu_);
  bool done_ ABSL_GUARDED_BY(mu_) = false;
  grpc::Status status_ ABSL_GUARDED_BY(mu_);
};

namespace {

// The reactor of one Hold RPC: reads the lease id, then a second read that
// completes when the call ends (the server sends no more).
template <typename Request, typename Response>
class HoldCall final : public Lease::Call, public grpc::ClientReadReactor<Response> {
 public:
  HoldCall(std::unique_ptr<grpc::ClientContext> context, const char* rpc)
      : Lease::Call(std::move(context), rpc) {}

  // `start(context, request, reactor)` begins the RPC on the stub.
  template <typename StartFn>
  void Begin(StartFn start) {
    start(context(), &request_, this);
    this->StartRead(&response_);
    this->StartCall();
  }
  void OnReadDone(bool ok) override {
    if (ok && GotId(response_.lease_id())) this->StartRead(&response_);
  }
  void OnDone(const grpc::Status& status) override { Done(status); }

 private:
  Request request_;
  Response response_;
};

}  // namespace

absl::StatusOr<std::unique_ptr<Lease>> Lease::Open(LeaseKind kind, pb::Attention::Stub* stub,
                                                   std::unique_ptr<grpc::ClientContext> context,
                                                   absl::Duration timeout) {
  std::unique_ptr<Call> call;
  if (kind == LeaseKind::kRegions) {
    using Hold = HoldCall<pb::HoldRegionsRequest, pb::HoldRegionsResponse>;
    auto hold = std::make_unique<Hold>(std::move(context), LeaseRpc(kind));
    hold->Begin([stub](auto* c, auto* request, auto* reactor) {
      stub->async()->HoldRegions(c, request, reactor);
    });
    call = std::move(hold);
  } else {
    using Hold = HoldCall<pb::HoldSessionsRequest, pb::HoldSessionsResponse>;
    auto hold = std::make_unique<Hold>(std::move(context), LeaseRpc(kind));
    hold->Begin([stub](auto* c, auto* request, auto* reactor) {
      stub->async()->HoldSessions(c, request, reactor);
    });
    call = std::move(hold);
  }
  absl::StatusOr<std::string> id = call->WaitForId(timeout);
  if (!id.ok()) {
    call->context()->TryCancel();
    call->WaitDone();
    return id.status();
  }
  return std::unique_ptr<Lease>(new Lease(std::move(call), *std::move(id)));
}

Lease::Lease(std::unique_ptr<Call> call, std::string id)
    : call_(std::move(call)), id_(std::move(id)) {}

Lease::~Lease() {
  call_->context()->TryCancel();
  call_->WaitDone();
}

bool Lease::alive() const { return !call_->done(); }

}  // namespace attn::internal
