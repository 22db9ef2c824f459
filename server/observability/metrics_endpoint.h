// server/observability/metrics_endpoint.h
//
// MetricsEndpoint: an HTTP listener that serves a prometheus::Collectable
// at GET /metrics in the text exposition format (prometheus-cpp's Exposer,
// on civetweb, with its own two threads; nothing of gRPC's). It listens
// from Create() until it is destroyed, so a scrape during start-up or drain
// still gets an answer.
#ifndef ATTN_SERVER_OBSERVABILITY_METRICS_ENDPOINT_H_
#define ATTN_SERVER_OBSERVABILITY_METRICS_ENDPOINT_H_

#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "prometheus/collectable.h"

namespace prometheus {
class Exposer;
}  // namespace prometheus

namespace attn::server {

class MetricsEndpoint {
 public:
  // Listens on host:port (host an IPv4 address or "localhost": Debian's
  // civetweb is built without IPv6; port 1..65535) and serves `metrics`.
  // UNAVAILABLE, naming --metrics_port and --metrics_address, when the port
  // cannot be bound.
  static absl::StatusOr<std::unique_ptr<MetricsEndpoint>> Create(
      const std::string& host, int port, std::shared_ptr<prometheus::Collectable> metrics);
  ~MetricsEndpoint();

  MetricsEndpoint(const MetricsEndpoint&) = delete;
  MetricsEndpoint& operator=(const MetricsEndpoint&) = delete;

  // "http://host:port/metrics".
  const std::string& url() const { return url_; }

 private:
  MetricsEndpoint() = default;

  std::shared_ptr<prometheus::Collectable> metrics_;
  std::unique_ptr<prometheus::Exposer> exposer_;
  std::string url_;
};

// The host part of a gRPC listen address ("0.0.0.0:50051" -> "0.0.0.0");
// INVALID_ARGUMENT for one with no IPv4 host to share (a unix: socket, an
// IPv6 address), naming --metrics_address as the way out.
absl::StatusOr<std::string> MetricsHostOf(const std::string& listen);

}  // namespace attn::server

#endif  // ATTN_SERVER_OBSERVABILITY_METRICS_ENDPOINT_H_
