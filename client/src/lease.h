// The client's side of HoldRegions and HoldSessions (attention.proto): one
// long call whose first message is the lease id the client registers
// regions (or opens sessions) under. The server ends what the lease holds
// when the call ends, so cancelling it (the destructor, or the process
// exiting) cleans up on the server.
#ifndef ATTN_CLIENT_SRC_LEASE_H_
#define ATTN_CLIENT_SRC_LEASE_H_

#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "attnserve/v1/attention.grpc.pb.h"
#include "grpcpp/client_context.h"

namespace attn::internal {

enum class LeaseKind { kRegions, kSessions };

// "HoldRegions" or "HoldSessions".
const char* LeaseRpc(LeaseKind kind);

class Lease {
 public:
  // Starts the kind's Hold call on `stub` with `context` (metadata set, no
  // deadline) and waits up to `timeout` for the lease id; the server's
  // status when it refuses (FAILED_PRECONDITION without
  // --allow_shared_memory or with sessions off, ...).
  static absl::StatusOr<std::unique_ptr<Lease>> Open(LeaseKind kind,
                                                     attnserve::v1::Attention::Stub* stub,
                                                     std::unique_ptr<grpc::ClientContext> context,
                                                     absl::Duration timeout);
  // Ends the lease (cancels the call) and waits for the call to finish.
  ~Lease();

  const std::string& id() const { return id_; }
  // False once the call has ended (the connection dropped, the server
  // stopped): what it held is gone, a new lease is needed.
  bool alive() const;

  class Call;  // the Hold call's reactor (lease.cc)

 private:
  Lease(std::unique_ptr<Call> call, std::string id);
  std::unique_ptr<Call> call_;
  std::string id_;
};

}  // namespace attn::internal

#endif  // ATTN_CLIENT_SRC_LEASE_H_
