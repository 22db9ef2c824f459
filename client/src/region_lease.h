// The client's side of HoldRegions (attention.proto): one long call whose
// first message is the lease id the client registers regions under. The
// server unregisters them all when the call ends, so cancelling it (the
// destructor, or the process exiting) cleans up on the server.
#ifndef ATTN_CLIENT_SRC_REGION_LEASE_H_
#define ATTN_CLIENT_SRC_REGION_LEASE_H_

#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "attnserve/v1/attention.grpc.pb.h"
#include "grpcpp/client_context.h"

namespace attn::internal {

class RegionLease {
 public:
  // Starts HoldRegions on `stub` with `context` (metadata set, no deadline)
  // and waits up to `timeout` for the lease id; the server's status when it
  // refuses (FAILED_PRECONDITION without --allow_shared_memory, ...).
  static absl::StatusOr<std::unique_ptr<RegionLease>> Open(
      attnserve::v1::Attention::Stub* stub, std::unique_ptr<grpc::ClientContext> context,
      absl::Duration timeout);
  // Ends the lease (cancels the call) and waits for the call to finish.
  ~RegionLease();

  const std::string& id() const { return id_; }
  // False once the call has ended (the connection dropped, the server
  // stopped): its regions are gone, a new lease is needed.
  bool alive() const;

 private:
  class Reactor;
  RegionLease(std::unique_ptr<Reactor> reactor, std::string id);
  std::unique_ptr<Reactor> reactor_;
  std::string id_;
};

}  // namespace attn::internal

#endif  // ATTN_CLIENT_SRC_REGION_LEASE_H_
