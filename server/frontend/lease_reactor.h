// server/frontend/lease_reactor.h
//
// The server's side of the lease calls (HoldRegions, HoldSessions in
// attention.proto), and the one-line answer of the unary calls on what a
// lease holds.
//
// LeaseReactor<Response>: sends one message with the lease id, then stays
// open until the client goes (cancel, disconnect, server stop); `end` runs
// exactly once when the call ends and returns what it freed, for the log.
// RefusedLease<Response>: a Hold call refused at once with `status`.
#ifndef ATTN_SERVER_FRONTEND_LEASE_REACTOR_H_
#define ATTN_SERVER_FRONTEND_LEASE_REACTOR_H_

#include <functional>
#include <mutex>
#include <string>
#include <utility>

#include "absl/status/status.h"
#include "core/log.h"
#include "core/status_util.h"
#include "grpcpp/grpcpp.h"

namespace attn::server {

template <typename Response>
class LeaseReactor final : public grpc::ServerWriteReactor<Response> {
 public:
  // `kind` names the lease in the log ("region", "session").
  LeaseReactor(const char* kind, std::string lease_id, const std::string& peer,
               std::function<std::string()> end)
      : kind_(kind), lease_id_(std::move(lease_id)), end_(std::move(end)) {
    LOGF(kInfo, "%s lease %s… opened by %s", kind_, lease_id_.substr(0, 8), peer);
    response_.set_lease_id(lease_id_);
    this->StartWrite(&response_);
  }
  void OnWriteDone(bool) override {}  // stays open; a failed write means the call ended
  void OnCancel() override {
    EndLease("its call ended");
    this->Finish(grpc::Status(grpc::StatusCode::CANCELLED, std::string(kind_) + " lease ended"));
  }
  void OnDone() override {
    EndLease("its call finished");
    delete this;
  }

 private:
  void EndLease(const char* why) {
    std::lock_guard<std::mutex> lock(mu_);
    if (ended_) return;
    ended_ = true;
    const std::string freed = end_();
    LOGF(kInfo, "%s lease %s… ended (%s): %s", kind_, lease_id_.substr(0, 8), why, freed);
  }

  const char* const kind_;
  const std::string lease_id_;
  const std::function<std::string()> end_;
  Response response_;
  std::mutex mu_;
  bool ended_ = false;
};

template <typename Response>
class RefusedLease final : public grpc::ServerWriteReactor<Response> {
 public:
  explicit RefusedLease(const absl::Status& status) { this->Finish(ToGrpcStatus(status)); }
  void OnDone() override { delete this; }
};

// The default reactor of a unary call, finished with `status`.
inline grpc::ServerUnaryReactor* Finished(grpc::CallbackServerContext* context,
                                          const absl::Status& status) {
  grpc::ServerUnaryReactor* reactor = context->DefaultReactor();
  reactor->Finish(ToGrpcStatus(status));
  return reactor;
}

}  // namespace attn::server

#endif  // ATTN_SERVER_FRONTEND_LEASE_REACTOR_H_
