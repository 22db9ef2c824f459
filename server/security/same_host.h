// server/security/same_host.h
//
// Whether a call comes from the server's own host, by the peer address gRPC
// reports: a unix-domain socket, or a loopback address (127.0.0.0/8, ::1,
// or ::ffff:127.x.y.z). Shared-memory regions are for such callers only: a
// remote caller could otherwise name objects on the server's host that it
// could never have created.
#ifndef ATTN_SERVER_SECURITY_SAME_HOST_H_
#define ATTN_SERVER_SECURITY_SAME_HOST_H_

#include "absl/strings/string_view.h"

namespace attn::server {

// `peer` as grpc::ServerContext::peer() gives it: "unix:/path", "unix:",
// "ipv4:127.0.0.1:5000", "ipv6:[::1]:5000", ...
bool IsSameHostPeer(absl::string_view peer);

}  // namespace attn::server

#endif  // ATTN_SERVER_SECURITY_SAME_HOST_H_
