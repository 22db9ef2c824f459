#include "security/server_credentials.h"

#include <fstream>
#include <sstream>
#include <utility>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "attn/token_file.h"
#include "security/auth_processor.h"
#include "security/bearer_tokens.h"
#include "core/status_util.h"

namespace attn::server {
namespace {

// The PEM file a flag names; errors name the flag.
absl::StatusOr<std::string> ReadPem(const std::string& path, absl::string_view flag) {
  std::ifstream file(path, std::ios::binary);
  if (!file) return absl::InvalidArgumentError(absl::StrCat(flag, ": cannot read '", path, "'"));
  std::ostringstream contents;
  contents << file.rdbuf();
  std::string pem = contents.str();
  if (!absl::StrContains(pem, "-----BEGIN ")) {
    return absl::InvalidArgumentError(absl::StrCat(flag, ": '", path, "' is not a PEM file"));
  }
  return pem;
}

absl::StatusOr<std::shared_ptr<grpc::ServerCredentials>> TlsCredentials(
    const SecurityOptions& security) {
  grpc::SslServerCredentialsOptions::PemKeyCertPair pair;
  ASSIGN_OR_RETURN(pair.private_key, ReadPem(security.tls_key_path, "--tls_key"));
  ASSIGN_OR_RETURN(pair.cert_chain, ReadPem(security.tls_cert_path, "--tls_cert"));
  grpc::SslServerCredentialsOptions ssl(GRPC_SSL_DONT_REQUEST_CLIENT_CERTIFICATE);
  ssl.pem_key_cert_pairs.push_back(std::move(pair));
  if (!security.tls_client_ca_path.empty()) {
    ASSIGN_OR_RETURN(ssl.pem_root_certs,
                     ReadPem(security.tls_client_ca_path, "--tls_client_ca"));
    ssl.client_certificate_request =
        GRPC_SSL_REQUEST_AND_REQUIRE_CLIENT_CERTIFICATE_AND_VERIFY;
  }
  return grpc::SslServerCredentials(ssl);
}

}  // namespace

absl::StatusOr<ServerSecurity> MakeServerSecurity(absl::string_view listen,
                                                  const SecurityOptions& security) {
  ServerSecurity result;
  std::vector<std::string> parts;
  if (security.tls()) {
    ASSIGN_OR_RETURN(result.credentials, TlsCredentials(security));
    parts.push_back("TLS");
    if (!security.tls_client_ca_path.empty()) parts.push_back("client certificates");
  } else if (security.tokens()) {
    const bool unix_socket = absl::StartsWith(listen, "unix");
    result.credentials =
        grpc::experimental::LocalServerCredentials(unix_socket ? UDS : LOCAL_TCP);
    parts.push_back("plaintext (local)");
  } else {
    result.credentials = grpc::InsecureServerCredentials();
    parts.push_back("plaintext");
  }
  if (security.tokens()) {
    ASSIGN_OR_RETURN(std::vector<std::string> tokens,
                     attn::ReadTokenFile(security.token_file, "--token_file"));
    parts.push_back(absl::StrCat(tokens.size(), tokens.size() == 1 ? " token" : " tokens"));
    result.credentials->SetAuthMetadataProcessor(
        std::make_shared<TokenAuthProcessor>(BearerTokens(std::move(tokens))));
  }
  result.description = absl::StrJoin(parts, ", ");
  return result;
}

}  // namespace attn::server
