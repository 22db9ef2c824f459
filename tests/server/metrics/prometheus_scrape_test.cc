// A real Prometheus server (Debian's `prometheus`, installed by
// install_deps.sh --with-checks) scrapes attn_server's /metrics (CPU
// backend); the test reads a counter and a histogram count back through
// Prometheus's HTTP API (/api/v1/query) and checks them against the calls
// it sent. Nothing is on a fixed port: attn_server's metrics port is picked
// free (StartWithMetrics retries), and Prometheus listens on 127.0.0.1:0
// and logs the port it bound ("Listening on" address=127.0.0.1:PORT).
// Every wait polls a condition with a generous bound.
#include <fcntl.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <optional>
#include <sstream>
#include <string>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "attnserve/v1/attention.grpc.pb.h"
#include "e2e_util.h"
#include "gtest/gtest.h"
#include "http_get.h"
#include "metrics_server.h"
#include "nlohmann/json.hpp"
#include "test_util.h"

namespace attn::testing {
namespace {

namespace rpb = ::attnserve::v1;

constexpr int kCalls = 4;
constexpr char kJob[] = "attn_server";
// Bounds on waits that normally take a second or two (a loaded 2-core CI).
constexpr absl::Duration kStartBound = absl::Seconds(90);
constexpr absl::Duration kScrapeBound = absl::Seconds(120);

std::string PrometheusBinary() {
  const char* path = std::getenv("ATTN_PROMETHEUS_BINARY");
  return path != nullptr && *path != '\0' ? path : "/usr/bin/prometheus";
}

// A child process with its stdout and stderr in a file; SIGTERM and a
// bounded wait (then SIGKILL) when it goes out of scope.
class Child {
 public:
  Child(std::vector<std::string> args, const std::string& log_path) {
    std::vector<char*> argv;
    for (std::string& arg : args) argv.push_back(arg.data());
    argv.push_back(nullptr);
    const int log_fd = open(log_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    const pid_t parent = getpid();
    pid_ = fork();
    if (pid_ == 0) {
      prctl(PR_SET_PDEATHSIG, SIGKILL);  // never outlive the test
      if (getppid() != parent || log_fd < 0) _exit(127);
      dup2(log_fd, STDOUT_FILENO);
      dup2(log_fd, STDERR_FILENO);
      execv(argv[0], argv.data());
      _exit(127);
    }
    if (log_fd >= 0) close(log_fd);
  }
  ~Child() {
    if (pid_ <= 0) return;
    kill(pid_, SIGTERM);
    const absl::Time deadline = absl::Now() + absl::Seconds(30);
    while (waitpid(pid_, nullptr, WNOHANG) == 0) {
      if (absl::Now() > deadline) {
        kill(pid_, SIGKILL);
        waitpid(pid_, nullptr, 0);
        return;
      }
      absl::SleepFor(absl::Milliseconds(20));
    }
  }
  bool started() const { return pid_ > 0; }
  bool Running() const { return waitpid(pid_, nullptr, WNOHANG) == 0; }

 private:
  pid_t pid_ = -1;
};

std::string ReadFile(const std::string& path) {
  std::ifstream file(path);
  std::stringstream text;
  text << file.rdbuf();
  return text.str();
}

// The port in Prometheus's `msg="Listening on" address=127.0.0.1:PORT` line.
std::optional<int> ListeningPort(const std::string& log) {
  const std::string marker = "msg=\"Listening on\" address=127.0.0.1:";
  const size_t at = log.find(marker);
  if (at == std::string::npos) return std::nullopt;
  const size_t begin = at + marker.size();
  const size_t end = log.find_first_not_of("0123456789", begin);
  int port = 0;
  if (end == std::string::npos || !absl::SimpleAtoi(log.substr(begin, end - begin), &port)) {
    return std::nullopt;
  }
  return port;
}

// The value of the one series `query` selects, through /api/v1/query;
// nullopt while Prometheus has no sample of it (or does not answer yet).
std::optional<double> QueryValue(int port, const std::string& query) {
  auto response = HttpGet(port, "/api/v1/query?query=" + UrlEncode(query));
  if (!response.ok() || response->status != 200) return std::nullopt;
  const nlohmann::json answer = nlohmann::json::parse(response->body, nullptr, false);
  if (answer.is_discarded() || answer.value("status", "") != "success") return std::nullopt;
  const nlohmann::json& result = answer["data"]["result"];
  if (!result.is_array() || result.size() != 1) return std::nullopt;
  // "value": [<unix time>, "<value as a string>"]
  double value = 0;
  if (!absl::SimpleAtod(result[0]["value"][1].get<std::string>(), &value)) return std::nullopt;
  return value;
}

// Polls QueryValue until it has a sample or `bound` passes.
std::optional<double> FirstSample(int port, const std::string& query, absl::Duration bound) {
  const absl::Time deadline = absl::Now() + bound;
  while (true) {
    if (std::optional<double> value = QueryValue(port, query)) return value;
    if (absl::Now() > deadline) return std::nullopt;
    absl::SleepFor(absl::Milliseconds(250));
  }
}

TEST(PrometheusScrapeTest, CounterReadBackThroughPrometheusQueryApi) {
  const std::string prometheus = PrometheusBinary();
  ASSERT_EQ(access(prometheus.c_str(), X_OK), 0)
      << prometheus << " is not there: install Debian's prometheus package "
      << "(deploy/scripts/install_deps.sh --with-checks) or set ATTN_PROMETHEUS_BINARY";

  auto server = StartWithMetrics();
  ASSERT_TRUE(server.ok()) << server.status();
  // The calls go first, so the very first scrape already holds all of them.
  auto stub = rpb::Attention::NewStub(server->process->NewChannel());
  for (int i = 0; i < kCalls; ++i) {
    auto context = ContextWithDeadline(absl::Seconds(60));
    rpb::AttendResponse response;
    const rpb::AttendRequest request = MakeRequest(
        MakeRandomInputs({1, 16, 2, 64}, DType::kBFloat16, FreshSeed()), absl::StrCat("p", i));
    const grpc::Status status = stub->Attend(context.get(), request, &response);
    ASSERT_TRUE(status.ok()) << status.error_message();
  }

  const char* tmp = std::getenv("TMPDIR");
  std::string dir =
      absl::StrCat(tmp != nullptr && *tmp != '\0' ? tmp : "/tmp", "/attn_prometheus.XXXXXX");
  ASSERT_NE(mkdtemp(dir.data()), nullptr) << std::strerror(errno);
  const std::string config = dir + "/prometheus.yml";
  const std::string log_path = dir + "/prometheus.log";
  {
    std::ofstream out(config);
    out << "global:\n  scrape_interval: 1s\n  scrape_timeout: 1s\n"
        << "scrape_configs:\n  - job_name: " << kJob << "\n    static_configs:\n"
        << "      - targets: ['127.0.0.1:" << server->metrics_port << "']\n";
    ASSERT_TRUE(out.good()) << "cannot write " << config;
  }
  std::optional<double> success, histogram_count, up;
  std::string log;
  {
    Child child({prometheus, "--config.file=" + config, "--storage.tsdb.path=" + dir + "/data",
                 "--web.listen-address=127.0.0.1:0"},
                log_path);
    ASSERT_TRUE(child.started());
    std::optional<int> port;
    const absl::Time deadline = absl::Now() + kStartBound;
    while (!(port = ListeningPort(ReadFile(log_path))) && child.Running() &&
           absl::Now() < deadline) {
      absl::SleepFor(absl::Milliseconds(50));
    }
    ASSERT_TRUE(port.has_value()) << "Prometheus did not report its port:\n" << ReadFile(log_path);

    success = FirstSample(
        *port, R"(attn_inference_request_success_total{kernel="cpu_flash",rpc="Attend"})",
        kScrapeBound);
    histogram_count = QueryValue(
        *port, R"(attn_inference_request_duration_seconds_count{kernel="cpu_flash"})");
    up = QueryValue(*port, absl::StrCat("up{job=\"", kJob, "\"}"));
    log = ReadFile(log_path);
  }
  std::filesystem::remove_all(dir);

  ASSERT_TRUE(success.has_value()) << "no sample within " << kScrapeBound << "; log:\n" << log;
  EXPECT_EQ(*success, kCalls);
  EXPECT_EQ(histogram_count, kCalls);
  EXPECT_EQ(up, 1);
}

}  // namespace
}  // namespace attn::testing
