#include "security/exposure_policy.h"

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"

namespace attn::server {

bool IsLoopbackListen(absl::string_view listen) {
  if (absl::StartsWith(listen, "unix:") || absl::StartsWith(listen, "unix-abstract:")) {
    return true;
  }
  absl::ConsumePrefix(&listen, "ipv4:");
  absl::ConsumePrefix(&listen, "ipv6:");
  absl::ConsumePrefix(&listen, "dns:");
  const size_t colon = listen.rfind(':');
  absl::string_view host = colon == absl::string_view::npos ? listen : listen.substr(0, colon);
  if (absl::ConsumePrefix(&host, "[")) {
    if (!absl::ConsumeSuffix(&host, "]")) return false;
    return host == "::1";
  }
  if (absl::EqualsIgnoreCase(host, "localhost")) return true;
  // 127.0.0.0/8: four decimal octets, the first 127.
  int octets = 0;
  for (absl::string_view part : absl::StrSplit(host, '.')) {
    int value = 0;
    if (!absl::SimpleAtoi(part, &value) || value < 0 || value > 255) return false;
    if (octets == 0 && value != 127) return false;
    ++octets;
  }
  return octets == 4;
}

absl::Status CheckExposure(absl::string_view listen, const SecurityOptions& security,
                           std::string* warning) {
  warning->clear();
  if (security.tls_cert_path.empty() != security.tls_key_path.empty()) {
    return absl::InvalidArgumentError("--tls_cert and --tls_key must be given together");
  }
  if (!security.tls_client_ca_path.empty() && !security.tls()) {
    return absl::InvalidArgumentError(
        "--tls_client_ca (client certificates) needs TLS: give --tls_cert and --tls_key");
  }
  if (IsLoopbackListen(listen) || security.tls()) return absl::OkStatus();
  if (security.tokens()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--token_file with --listen=", listen,
        " (beyond loopback) needs TLS: give --tls_cert and --tls_key, or the tokens cross "
        "the network in clear"));
  }
  if (!security.insecure) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--listen=", listen,
        " is reachable beyond this host without TLS or tokens: give --tls_cert and --tls_key "
        "(and --token_file, --tls_client_ca), or --insecure to serve anyone who can connect"));
  }
  *warning = absl::StrCat("--insecure: serving ", listen,
                          " without TLS or tokens; anyone who can reach it may call it");
  return absl::OkStatus();
}

}  // namespace attn::server
