// server/server.h
//
// AttentionServer: the attn_server process minus flag parsing and signals.
// It owns the gRPC server (Attention service, grpc.health.v1, reflection)
// and the runtime behind it (scheduler and executors).
//
// Lifecycle:
//   Create()   listens on options.listen (and serves /metrics on
//              options.metrics_port when set); health reports NOT_SERVING
//              and the Attention RPCs answer UNAVAILABLE while it starts.
//   Start()    builds the backend (CUDA buffers, warm-up), then reports
//              SERVING and writes options.port_file.
//   Shutdown() drains: health NOT_SERVING, options.drain_delay of serving
//              on, then no new calls; calls in flight get options.drain_timeout
//              to finish before they are cancelled; then the workers stop.
//              Called by the destructor when not called before.
#ifndef ATTN_SERVER_SERVER_H_
#define ATTN_SERVER_SERVER_H_

#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "core/server_options.h"

namespace grpc {
class Server;
}  // namespace grpc

namespace attn::server {

class AttentionService;
class MetricsEndpoint;
class PrometheusMetrics;
class Runtime;
class TcpAcceptor;

class AttentionServer {
 public:
  static absl::StatusOr<std::unique_ptr<AttentionServer>> Create(const ServerOptions& options);
  ~AttentionServer();

  AttentionServer(const AttentionServer&) = delete;
  AttentionServer& operator=(const AttentionServer&) = delete;

  absl::Status Start();
  void Shutdown();

  // The port actually bound (the chosen one when options.listen asks for 0).
  int port() const { return port_; }
  // options.listen with the bound port.
  const std::string& address() const { return address_; }
  // One line: backend, devices, workers, limits (for the start-up log).
  std::string Describe() const;
  // "http://host:port/metrics", or "" without options.metrics_port.
  std::string metrics_url() const;

 private:
  explicit AttentionServer(const ServerOptions& options);
  void SetServing(bool serving);

  ServerOptions options_;
  std::unique_ptr<AttentionService> service_;
  std::unique_ptr<grpc::Server> grpc_server_;
  // Accepts for grpc_server_ on a HOST:PORT listen (null for unix:).
  std::unique_ptr<TcpAcceptor> tcp_acceptor_;
  // Declared before runtime_ so they outlive it (the runtime feeds them).
  std::shared_ptr<PrometheusMetrics> metrics_;
  std::unique_ptr<MetricsEndpoint> metrics_endpoint_;
  std::unique_ptr<Runtime> runtime_;
  int port_ = 0;
  std::string address_;
  std::string security_;  // ServerSecurity::description
  bool shut_down_ = false;
};

// Writes "<port>\n" to `path` through a temporary file and a rename.
absl::Status WritePortFile(const std::string& path, int port);

}  // namespace attn::server

#endif  // ATTN_SERVER_SERVER_H_
