#include "observability/metrics_endpoint.h"

#include <exception>
#include <utility>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "prometheus/exposer.h"

namespace attn::server {

absl::StatusOr<std::unique_ptr<MetricsEndpoint>> MetricsEndpoint::Create(
    const std::string& host, int port, std::shared_ptr<prometheus::Collectable> metrics) {
  if (port < 1 || port > 65535) {
    return absl::InvalidArgumentError(
        absl::StrCat("--metrics_port is ", port, "; it must be between 1 and 65535"));
  }
  std::unique_ptr<MetricsEndpoint> endpoint(new MetricsEndpoint());
  const std::string bind = absl::StrCat(host, ":", port);
  // Exposer throws (std::runtime_error from CivetServer) when it cannot bind.
  try {
    endpoint->exposer_ = std::make_unique<prometheus::Exposer>(bind, /*num_threads=*/2);
  } catch (const std::exception& e) {
    return absl::UnavailableError(absl::StrCat(
        "cannot serve metrics on ", bind,
        " (--metrics_address, --metrics_port): address in use or invalid (", e.what(), ")"));
  }
  endpoint->metrics_ = std::move(metrics);
  endpoint->exposer_->RegisterCollectable(endpoint->metrics_);
  endpoint->url_ = absl::StrCat("http://", bind, "/metrics");
  return endpoint;
}

// The exposer (and its threads) goes first, while metrics_ is still alive.
MetricsEndpoint::~MetricsEndpoint() { exposer_.reset(); }

absl::StatusOr<std::string> MetricsHostOf(const std::string& listen) {
  const size_t colon = listen.rfind(':');
  if (absl::StartsWith(listen, "unix:") || colon == std::string::npos || colon == 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--listen=", listen, " has no host for the metrics port; set --metrics_address"));
  }
  if (absl::StartsWith(listen, "[")) {
    return absl::InvalidArgumentError(
        absl::StrCat("--listen=", listen,
                     " is IPv6, and the metrics endpoint listens on IPv4 only "
                     "(civetweb as Debian builds it); set --metrics_address, e.g. 0.0.0.0"));
  }
  return listen.substr(0, colon);
}

}  // namespace attn::server
