// server/frontend/peer_identity.h
//
// The caller a call's reservations are counted against (admission's fair
// shares, scheduling/admission.h): the identity of the token it carried
// when tokens are on (every connection of one client is then one caller),
// else its connection (gRPC's peer address, e.g. "ipv4:127.0.0.1:50321").
#ifndef ATTN_SERVER_FRONTEND_PEER_IDENTITY_H_
#define ATTN_SERVER_FRONTEND_PEER_IDENTITY_H_

#include <string>

#include "grpcpp/server_context.h"

namespace attn::server {

std::string PeerOf(const grpc::ServerContextBase& context);

}  // namespace attn::server

#endif  // ATTN_SERVER_FRONTEND_PEER_IDENTITY_H_
