// tests/server/metrics/metrics_server.h
//
// StartWithMetrics: attn_server (CPU backend) with --metrics_port on a free
// loopback port. The port is picked free, then bound by the server, so
// another process may take it in between: a start that fails is retried on
// a new port, a few times.
#ifndef ATTN_TESTS_SERVER_METRICS_METRICS_SERVER_H_
#define ATTN_TESTS_SERVER_METRICS_METRICS_SERVER_H_

#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "http_get.h"
#include "server_process.h"

namespace attn::testing {

struct MetricsServer {
  std::unique_ptr<ServerProcess> process;
  int metrics_port = 0;
};

inline absl::StatusOr<MetricsServer> StartWithMetrics(std::vector<std::string> flags = {}) {
  absl::Status last;
  for (int attempt = 0; attempt < 4; ++attempt) {
    absl::StatusOr<int> port = FreeLoopbackPort();
    if (!port.ok()) return port.status();
    std::vector<std::string> all = {"--backend=cpu", "--cpu_threads=1",
                                    absl::StrCat("--metrics_port=", *port)};
    all.insert(all.end(), flags.begin(), flags.end());
    absl::StatusOr<std::unique_ptr<ServerProcess>> process = ServerProcess::Start(all);
    if (process.ok()) return MetricsServer{*std::move(process), *port};
    last = process.status();
  }
  return last;
}

}  // namespace attn::testing

#endif  // ATTN_TESTS_SERVER_METRICS_METRICS_SERVER_H_
