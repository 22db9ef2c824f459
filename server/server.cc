#include "server.h"

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/time/clock.h"
#include "frontend/attention_service.h"
#include "grpc/health/v1/health.pb.h"
#include "grpcpp/ext/proto_server_reflection_plugin.h"
#include "grpcpp/health_check_service_interface.h"
#include "grpcpp/impl/server_builder_option.h"
#include "grpcpp/impl/server_builder_plugin.h"
#include "grpcpp/security/server_credentials.h"
#include "grpcpp/server.h"
#include "grpcpp/server_builder.h"
#include "limits/fd_limit.h"
#include "limits/tcp_acceptor.h"
#include "core/log.h"
#include "observability/metrics_endpoint.h"
#include "observability/prometheus_metrics.h"
#include "runtime/runtime.h"
#include "security/exposure_policy.h"
#include "security/server_credentials.h"
#include "core/status_util.h"

#ifndef ATTN_VERSION
#define ATTN_VERSION "unknown"
#endif

namespace attn::server {
namespace {

// A duration as the int milliseconds gRPC channel arguments take.
int ClampToIntMillis(absl::Duration d) {
  return static_cast<int>(std::min<int64_t>(absl::ToInt64Milliseconds(d), INT32_MAX));
}

constexpr char kAttentionServiceName[] = "attnserve.v1.Attention";

// options.listen with its port replaced by `port` ("[::]:0" -> "[::]:41234").
std::string WithPort(const std::string& listen, int port) {
  const size_t colon = listen.rfind(':');
  if (colon == std::string::npos) return absl::StrCat(listen, ":", port);
  return absl::StrCat(listen.substr(0, colon), ":", port);
}

// Linking gRPC's reflection library registers its builder plugin for every
// server (a static initializer), so --reflection=false has to take it out.
class WithoutReflection : public grpc::ServerBuilderOption {
 public:
  void UpdateArguments(grpc::ChannelArguments*) override {}
  void UpdatePlugins(std::vector<std::unique_ptr<grpc::ServerBuilderPlugin>>* plugins) override {
    plugins->erase(std::remove_if(plugins->begin(), plugins->end(),
                                  [](const std::unique_ptr<grpc::ServerBuilderPlugin>& p) {
                                    return p->name() == "proto_server_reflection";
                                  }),
                   plugins->end());
  }
};

// Reflection describes a service from the process's generated descriptor
// pool. gRPC's default health service encodes its messages without protobuf,
// so grpc.health.v1's descriptor (attn_health_proto) is linked and loaded only
// when something references it: without this a reflection client sees
// grpc.health.v1.Health listed but cannot describe it.
void LoadHealthDescriptor() { (void)grpc::health::v1::HealthCheckRequest::descriptor(); }

// --max_connections, with 0 resolved against the open-file limit.
int64_t MaxConnections(int configured, const FdLimit& fds) {
  const int64_t within = ConnectionsWithinFdLimit(fds.soft);
  if (configured == 0) return within;
  if (configured > within) {
    LOGF(kWarning,
         "--max_connections=%d leaves too few of the %d file descriptors (open-file limit) "
         "for the rest of the server; past %d connections accepts may fail with EMFILE "
         "(refused until descriptors are free)",
         configured, fds.soft, within);
  }
  return configured;
}

}  // namespace

absl::Status WritePortFile(const std::string& path, int port) {
  const std::string tmp = path + ".tmp";
  std::FILE* file = std::fopen(tmp.c_str(), "w");
  if (file == nullptr) {
    return absl::FailedPreconditionError(absl::StrCat("--port_file: cannot create ", tmp));
  }
  const bool written = std::fprintf(file, "%d\n", port) > 0;
  const bool closed = std::fclose(file) == 0;
  if (!written || !closed || std::rename(tmp.c_str(), path.c_str()) != 0) {
    std::remove(tmp.c_str());
    return absl::FailedPreconditionError(absl::StrCat("--port_file: cannot write ", path));
  }
  return absl::OkStatus();
}

AttentionServer::AttentionServer(const ServerOptions& options) : options_(options) {}

AttentionServer::~AttentionServer() { Shutdown(); }

absl::StatusOr<std::unique_ptr<AttentionServer>> AttentionServer::Create(
    const ServerOptions& options) {
  std::unique_ptr<AttentionServer> server(new AttentionServer(options));

  std::string exposure_warning;
  RETURN_IF_ERROR(CheckExposure(options.listen, options.security, &exposure_warning));
  if (!exposure_warning.empty()) LOGF(kWarning, "%s", exposure_warning);
  ASSIGN_OR_RETURN(ServerSecurity security, MakeServerSecurity(options.listen, options.security));
  server->security_ = security.description;

  // Every connection takes a descriptor: use all the hard limit allows.
  const FdLimit fds = RaiseFdLimit();
  if (!fds.error.empty()) {
    LOGF(kWarning, "open-file limit stays at %d: %s", fds.soft, fds.error);
  } else if (fds.soft != fds.before) {
    LOGF(kInfo, "open-file limit raised from %d to %d (the hard limit)", fds.before, fds.soft);
  }

  // Metrics first: a port that cannot be bound fails before gRPC listens.
  if (options.metrics_port != 0) {
    std::string host = options.metrics_address;
    if (host.empty()) {
      ASSIGN_OR_RETURN(host, MetricsHostOf(options.listen));
    }
    server->metrics_ = std::make_shared<PrometheusMetrics>();
    ASSIGN_OR_RETURN(server->metrics_endpoint_,
                     MetricsEndpoint::Create(host, options.metrics_port, server->metrics_));
  }

  grpc::EnableDefaultHealthCheckService(true);
  if (options.reflection) {
    LoadHealthDescriptor();
    grpc::reflection::InitProtoReflectionServerBuilderPlugin();
  }

  server->service_ = std::make_unique<AttentionService>();
  grpc::ServerBuilder builder;
  builder.RegisterService(server->service_.get());
  if (!options.reflection) builder.SetOption(std::make_unique<WithoutReflection>());
  // HOST:PORT: the server accepts, gRPC serves (limits/tcp_acceptor.h);
  // other forms (unix:...) on gRPC's own listener.
  std::unique_ptr<grpc::experimental::ExternalConnectionAcceptor> to_grpc;
  if (TcpAcceptor::Handles(options.listen)) {
    ASSIGN_OR_RETURN(server->tcp_acceptor_,
                     TcpAcceptor::Listen(options.listen,
                                         MaxConnections(options.max_connections, fds)));
    to_grpc = builder.experimental().AddExternalConnectionAcceptor(
        grpc::ServerBuilder::experimental_type::ExternalConnectionType::FROM_FD,
        security.credentials);
  } else {
    builder.AddListeningPort(options.listen, security.credentials, &server->port_);
  }
  int unix_bound = 0;
  if (!options.listen_unix.empty()) {
    // Same host only: tokens work without TLS here (server_credentials.h).
    ASSIGN_OR_RETURN(ServerSecurity unix_security,
                     MakeServerSecurity("unix:" + options.listen_unix, options.security));
    builder.AddListeningPort("unix:" + options.listen_unix, unix_security.credentials, &unix_bound);
  }
  const int max_message = static_cast<int>(options.limits.max_message_bytes);
  builder.SetMaxReceiveMessageSize(max_message);
  builder.SetMaxSendMessageSize(max_message);
  // Frames, windows and socket reads sized for tensors (attn/http2_tuning.h).
  for (const auto& [name, value] : options.http2.ChannelArgs()) {
    builder.AddChannelArgument(name, value);
  }
  // Calls at once on one connection (idle streams each hold server state).
  builder.AddChannelArgument(GRPC_ARG_MAX_CONCURRENT_STREAMS, options.max_concurrent_streams);
  if (options.max_connection_age > absl::ZeroDuration()) {
    builder.AddChannelArgument(GRPC_ARG_MAX_CONNECTION_AGE_MS,
                               ClampToIntMillis(options.max_connection_age));
    builder.AddChannelArgument(GRPC_ARG_MAX_CONNECTION_AGE_GRACE_MS,
                               ClampToIntMillis(options.drain_timeout));
  }
  server->grpc_server_ = builder.BuildAndStart();
  if (server->tcp_acceptor_ != nullptr && server->grpc_server_ != nullptr) {
    server->port_ = server->tcp_acceptor_->port();
    server->tcp_acceptor_->Start(std::move(to_grpc));
  }
  if (server->grpc_server_ == nullptr || server->port_ == 0) {
    return absl::UnavailableError(absl::StrCat("cannot listen on ", options.listen,
                                               " (--listen): address in use or invalid"));
  }
  if (!options.listen_unix.empty() && unix_bound == 0) {
    return absl::UnavailableError(absl::StrCat("cannot listen on unix:", options.listen_unix,
                                               " (--listen_unix): not a usable socket path"));
  }
  // The default health service starts out SERVING; say otherwise until Start.
  server->SetServing(false);
  server->address_ = WithPort(options.listen, server->port_);
  if (!options.listen_unix.empty()) LOGF(kInfo, "also listening on unix:%s", options.listen_unix);
  return server;
}

std::string AttentionServer::metrics_url() const {
  return metrics_endpoint_ != nullptr ? metrics_endpoint_->url() : "";
}

void AttentionServer::SetServing(bool serving) {
  grpc::HealthCheckServiceInterface* health = grpc_server_->GetHealthCheckService();
  if (health == nullptr) return;
  health->SetServingStatus("", serving);
  health->SetServingStatus(kAttentionServiceName, serving);
}

absl::Status AttentionServer::Start() {
  absl::StatusOr<std::unique_ptr<Runtime>> runtime = Runtime::Create(options_, [this]() {
    LOGF(kError, "every worker has failed: health NOT_SERVING; restart this server");
    SetServing(false);
  });
  if (!runtime.ok()) return runtime.status();
  runtime_ = *std::move(runtime);
  if (metrics_ != nullptr) {
    runtime_->SetMetricsSink(metrics_.get());
    metrics_->SetLoadSource([runtime = runtime_.get(), tcp = tcp_acceptor_.get()]() {
      LoadSnapshot load = runtime->Load();
      if (tcp != nullptr) load.connections = tcp->counts();
      return load;
    });
  }
  service_->Attach(runtime_.get());
  SetServing(true);
  if (!options_.port_file.empty()) RETURN_IF_ERROR(WritePortFile(options_.port_file, port_));
  return absl::OkStatus();
}

std::string AttentionServer::Describe() const {
  return absl::StrFormat(
      "attn_server %s serving on %s (%s): %s%s%s", ATTN_VERSION, address_, security_,
      runtime_ != nullptr ? runtime_->Describe() : "not started",
      tcp_acceptor_ != nullptr ? absl::StrCat(" max_connections=", tcp_acceptor_->counts().limit)
                               : "",
      metrics_endpoint_ != nullptr ? " metrics=" + metrics_endpoint_->url() : "");
}

void AttentionServer::Shutdown() {
  if (shut_down_ || grpc_server_ == nullptr) return;
  shut_down_ = true;
  // NOT_SERVING first, and for good: the health service ignores later updates.
  if (grpc::HealthCheckServiceInterface* health = grpc_server_->GetHealthCheckService()) {
    health->Shutdown();
  }
  if (options_.drain_delay > absl::ZeroDuration()) {
    LOGF(kInfo, "draining: health NOT_SERVING, still serving for %s (--drain_delay_s)",
         absl::FormatDuration(options_.drain_delay));
    absl::SleepFor(options_.drain_delay);
  }
  // Refuse new calls (UNAVAILABLE) and let the ones in progress finish.
  // Server::Shutdown(deadline) alone would also wait out the deadline for
  // idle client connections to close, so the server drains its own calls
  // first and then shuts gRPC down at once (cancelling whatever is left).
  service_->calls().Close();
  // Uploads that are idle now end at once; active ones keep their time.
  if (runtime_ != nullptr) runtime_->stream_watchdog().Drain();
  LOGF(kInfo, "draining: refusing new calls; %d in flight, given %s (--drain_timeout_s)",
       service_->calls().active(), absl::FormatDuration(options_.drain_timeout));
  if (service_->calls().WaitIdle(options_.drain_timeout)) {
    LOGF(kInfo, "drained: every call finished");
  } else {
    LOGF(kWarning,
         "drain timeout: cancelling %d calls still in flight (their running "
         "kernels finish first)",
         service_->calls().active());
  }
  // What gRPC cancels now was ended by the server, not by its client.
  if (runtime_ != nullptr) runtime_->BeginCancellingCalls();
  // gRPC drops (and leaks) connections handed to it once it shuts down.
  if (tcp_acceptor_ != nullptr) tcp_acceptor_->Stop();
  grpc_server_->Shutdown(absl::ToChronoTime(absl::Now()));
  // No call is left to submit work; let the workers finish and join them.
  if (runtime_ != nullptr) runtime_->Stop();
  // Scrapes stop reading the runtime before it goes.
  if (metrics_ != nullptr) metrics_->SetLoadSource(nullptr);
  runtime_.reset();
}

}  // namespace attn::server
