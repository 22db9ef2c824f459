// server/security/exposure_policy.h
//
// Which combinations of listening address and security flags attn_server
// starts with. The rule: a listener reachable beyond this host needs TLS
// (--tls_cert, --tls_key) or tokens (--token_file), or an explicit
// --insecure; tokens beyond loopback need TLS too, since a bearer token sent
// in clear can be read and replayed by anyone on the path (and gRPC checks
// call credentials only on secure transports, server_credentials.h).
#ifndef ATTN_SERVER_SECURITY_EXPOSURE_POLICY_H_
#define ATTN_SERVER_SECURITY_EXPOSURE_POLICY_H_

#include <string>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "core/server_options.h"

namespace attn::server {

// True when only this host can connect to `listen` (a --listen value):
// 127.0.0.0/8, [::1], localhost, or a unix socket (unix:, unix-abstract:).
// Wildcards (0.0.0.0, [::]), other addresses and names are not loopback.
bool IsLoopbackListen(absl::string_view listen);

// OK when `security` may serve on `listen`; else INVALID_ARGUMENT naming
// the flags to set. When allowed but open to anyone who can connect, sets
// `warning` (else clears it).
absl::Status CheckExposure(absl::string_view listen, const SecurityOptions& security,
                           std::string* warning);

}  // namespace attn::server

#endif  // ATTN_SERVER_SECURITY_EXPOSURE_POLICY_H_
