// server/security/auth_processor.h
//
// TokenAuthProcessor: gRPC's server-side hook for call credentials, run by
// the transport's auth filter on each call's initial metadata, before any
// handler or reactor exists. Chosen over a check in the reactors because it
// covers every service on the port the same way, unary and streaming alike
// (the Attention RPCs and gRPC's own reflection, which has no reactor of
// ours), answers UNAUTHENTICATED with our message before a request body is
// read or any byte budget is reserved; and over a server interceptor
// because gRPC 1.51's interceptors cannot end a call with a status.
// gRPC calls it only on secure credentials (TLS, or local credentials on a
// loopback or unix listener): see server_credentials.h.
//
// Exempt: grpc.health.v1 (load balancers and Kubernetes probes carry no
// token). The `authorization` metadata is consumed: handlers, logs and
// anything else on the server never see it.
#ifndef ATTN_SERVER_SECURITY_AUTH_PROCESSOR_H_
#define ATTN_SERVER_SECURITY_AUTH_PROCESSOR_H_

#include <utility>

#include "grpcpp/security/auth_metadata_processor.h"
#include "security/bearer_tokens.h"

namespace attn::server {

// The auth-context property naming which accepted token a call carried
// ("token <line>"): the caller's identity for admission's fair shares
// (frontend/peer_identity.h).
inline constexpr char kCallerProperty[] = "attn.caller";

class TokenAuthProcessor : public grpc::AuthMetadataProcessor {
 public:
  explicit TokenAuthProcessor(BearerTokens tokens) : tokens_(std::move(tokens)) {}

  // The check is a few hundred byte comparisons: run it on gRPC's thread.
  bool IsBlocking() const override { return false; }

  grpc::Status Process(const InputMetadata& auth_metadata, grpc::AuthContext* context,
                       OutputMetadata* consumed_auth_metadata,
                       OutputMetadata* response_metadata) override;

 private:
  const BearerTokens tokens_;
};

}  // namespace attn::server

#endif  // ATTN_SERVER_SECURITY_AUTH_PROCESSOR_H_
