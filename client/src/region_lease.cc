#include "region_lease.h"

#include <utility>

#include "absl/synchronization/mutex.h"
#include "status_util.h"

namespace attn::internal {

namespace pb = ::attnserve::v1;

class RegionLease::Reactor final : public grpc::ClientReadReactor<pb::HoldRegionsResponse> {
 public:
  explicit Reactor(std::unique_ptr<grpc::ClientContext> context) : context_(std::move(context)) {}
  grpc::ClientContext* context() { return context_.get(); }

  void Start(pb::Attention::Stub* stub) {
    stub->async()->HoldRegions(context_.get(), &request_, this);
    StartRead(&response_);
    StartCall();
  }
  void OnReadDone(bool ok) override {
    absl::MutexLock lock(&mu_);
    if (ok && !got_id_) {
      got_id_ = true;
      id_ = response_.lease_id();
      // A second read completes when the call ends (the server sends no more).
      StartRead(&response_);
    }
  }
  void OnDone(const grpc::Status& status) override {
    absl::MutexLock lock(&mu_);
    status_ = status;
    done_ = true;
  }

  // The lease id, or the call's status if it ended first.
  absl::StatusOr<std::string> WaitForId(absl::Duration timeout) {
    absl::MutexLock lock(&mu_);
    auto ready = [this]() ABSL_SHARED_LOCKS_REQUIRED(mu_) { return got_id_ || done_; };
    mu_.AwaitWithTimeout(absl::Condition(&ready), timeout);
    if (got_id_) return id_;
    if (done_) return FromGrpcStatus(status_, "HoldRegions", "");
    return absl::DeadlineExceededError("HoldRegions: no lease id within " +
                                       absl::FormatDuration(timeout));
  }
  void WaitDone() {
    absl::MutexLock lock(&mu_);
    mu_.Await(absl::Condition(&done_));
  }
  bool done() const {
    absl::MutexLock lock(&mu_);
    return done_;
  }

 private:
  std::unique_ptr<grpc::ClientContext> context_;
  pb::HoldRegionsRequest request_;
  pb::HoldRegionsResponse response_;
  mutable absl::Mutex mu_;
  bool got_id_ ABSL_GUARDED_BY(mu_) = false;
  std::string id_ ABSL_GUARDED_BY(mu_);
  bool done_ ABSL_GUARDED_BY(mu_) = false;
  grpc::Status status_ ABSL_GUARDED_BY(mu_);
};

absl::StatusOr<std::unique_ptr<RegionLease>> RegionLease::Open(
    pb::Attention::Stub* stub, std::unique_ptr<grpc::ClientContext> context,
    absl::Duration timeout) {
  auto reactor = std::make_unique<Reactor>(std::move(context));
  reactor->Start(stub);
  absl::StatusOr<std::string> id = reactor->WaitForId(timeout);
  if (!id.ok()) {
    reactor->context()->TryCancel();
    reactor->WaitDone();
    return id.status();
  }
  return std::unique_ptr<RegionLease>(new RegionLease(std::move(reactor), *std::move(id)));
}

RegionLease::RegionLease(std::unique_ptr<Reactor> reactor, std::string id)
    : reactor_(std::move(reactor)), id_(std::move(id)) {}

RegionLease::~RegionLease() {
  reactor_->context()->TryCancel();
  reactor_->WaitDone();
}

bool RegionLease::alive() const { return !reactor_->done(); }

}  // namespace attn::internal
