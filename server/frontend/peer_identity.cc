#include "frontend/peer_identity.h"

#include <memory>

#include "security/auth_processor.h"

namespace attn::server {

std::string PeerOf(const grpc::ServerContextBase& context) {
  if (const std::shared_ptr<const grpc::AuthContext> auth = context.auth_context()) {
    const std::vector<grpc::string_ref> callers = auth->FindPropertyValues(kCallerProperty);
    if (!callers.empty()) return std::string(callers.front().data(), callers.front().size());
  }
  return context.peer();
}

}  // namespace attn::server
