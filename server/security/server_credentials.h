// server/security/server_credentials.h
//
// The grpc::ServerCredentials of attn_server's listener, from its
// SecurityOptions (after exposure_policy.h has allowed them):
//
//   TLS (--tls_cert, --tls_key)    SslServerCredentials; --tls_client_ca
//                                  requires and verifies client certificates
//   tokens only (loopback, unix)   LocalServerCredentials: plaintext on the
//                                  wire like insecure ones (any client can
//                                  connect), but gRPC runs call-credential
//                                  checks on them, which it never does on
//                                  InsecureServerCredentials
//   neither                        InsecureServerCredentials
//
// With tokens, a TokenAuthProcessor checks every call (auth_processor.h).
// Files are read once here; replacing them needs a restart.
#ifndef ATTN_SERVER_SECURITY_SERVER_CREDENTIALS_H_
#define ATTN_SERVER_SECURITY_SERVER_CREDENTIALS_H_

#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "grpcpp/security/server_credentials.h"
#include "core/server_options.h"

namespace attn::server {

struct ServerSecurity {
  std::shared_ptr<grpc::ServerCredentials> credentials;
  // For the start-up line, e.g. "TLS, client certificates, 2 tokens".
  std::string description;
};

// INVALID_ARGUMENT naming the flag when a file cannot be read or holds no
// usable PEM or token.
absl::StatusOr<ServerSecurity> MakeServerSecurity(absl::string_view listen,
                                                  const SecurityOptions& security);

}  // namespace attn::server

#endif  // ATTN_SERVER_SECURITY_SERVER_CREDENTIALS_H_
