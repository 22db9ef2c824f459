// Connections (issue 13): running out of file descriptors once stopped new
// connections for good (gRPC 1.51 deactivates a listener after one accept4()
// EMFILE), and nothing capped connections. server/limits/tcp_acceptor.h.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "http_get.h"
#include "metrics_server.h"
#include "metrics_text.h"
#include "reliability_util.h"

namespace attn::testing {
namespace {

// A plain TCP connection to 127.0.0.1:port that sends nothing (-1 if
// connect fails). The kernel completes it from the listen backlog whether
// or not the server accepts it.
int IdleConnection(int port) {
  const int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return -1;
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_port = htons(static_cast<uint16_t>(port));
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (connect(fd, reinterpret_cast<sockaddr*>(&address), sizeof(address)) != 0) {
    close(fd);
    return -1;
  }
  return fd;
}

// Descriptors the process `pid` holds now.
int OpenDescriptors(pid_t pid) {
  int count = 0;
  std::error_code error;
  for (auto it = std::filesystem::directory_iterator(absl::StrCat("/proc/", pid, "/fd"), error);
       !error && it != std::filesystem::directory_iterator(); it.increment(error)) {
    ++count;
  }
  return count;
}

grpc::Status GetServerInfo(Stub& stub, absl::Duration timeout, bool wait_for_ready) {
  grpc::ClientContext context;
  context.set_deadline(absl::ToChronoTime(absl::Now() + timeout));
  context.set_wait_for_ready(wait_for_ready);
  rpb::ServerInfo info;
  return stub.GetServerInfo(&context, rpb::GetServerInfoRequest(), &info);
}

// Issue 13's finding: under `prlimit --nofile=256`, 300 idle connections;
// once they close, a new connection must be served. It must run out of
// descriptors (the cap is set above the limit, as a misconfigured server
// would be), and then recover.
TEST(ConnectionCapTest, KeepsAcceptingAfterFileDescriptorsRunOut) {
  constexpr int kOpenFileLimit = 256;
  constexpr int kIdleConnections = 300;
  const std::string log_path = TempLogPath("emfile");
  ServerProcess::Options options;
  options.flags = {"--backend=cpu", "--cpu_threads=1", "--max_connections=100000"};
  options.max_open_files = kOpenFileLimit;
  options.log_path = log_path;
  auto server = ServerProcess::Start(options);
  ASSERT_TRUE(server.ok()) << server.status();

  // This process holds the client ends: room for them under its own limit.
  rlimit own{};
  ASSERT_EQ(getrlimit(RLIMIT_NOFILE, &own), 0);
  if (own.rlim_cur < 2 * kIdleConnections && own.rlim_cur < own.rlim_max) {
    own.rlim_cur = std::min<rlim_t>(own.rlim_max, 4 * kIdleConnections);
    ASSERT_EQ(setrlimit(RLIMIT_NOFILE, &own), 0);
  }
  std::vector<int> idle;
  for (int i = 0; i < kIdleConnections; ++i) {
    const int fd = IdleConnection((*server)->port());
    ASSERT_GE(fd, 0) << "connection " << i << ": " << std::strerror(errno);
    idle.push_back(fd);
  }
  EXPECT_TRUE(Eventually([&] {
    return absl::StrContains(ReadWholeFile(log_path), "Too many open files");
  }, absl::Seconds(60))) << "the server never ran out of descriptors; its log:\n"
                         << ReadWholeFile(log_path);
  for (int fd : idle) close(fd);
  // The server closes its ends as it reads the clients' EOFs.
  EXPECT_TRUE(Eventually([&] { return OpenDescriptors((*server)->pid()) < 64; }))
      << OpenDescriptors((*server)->pid()) << " descriptors still open";

  // A new connection is accepted and served (gRPC 1.51's own listener
  // never accepts again: the call waits out its deadline).
  const HostInputs inputs = MakeRandomInputs({1, 16, 2, 64}, DType::kBFloat16, FreshSeed());
  const rpb::AttendRequest request = MakeRequest(inputs, "after-emfile");
  auto stub = rpb::Attention::NewStub((*server)->NewChannel());
  auto context = ContextWithDeadline(absl::Seconds(10));
  context->set_wait_for_ready(true);
  rpb::AttendResponse response;
  const grpc::Status status = stub->Attend(context.get(), request, &response);
  ASSERT_TRUE(status.ok()) << status.error_code() << " " << status.error_message()
                           << "\nserver log:\n" << ReadWholeFile(log_path);
  EXPECT_TRUE(MatchesReference(inputs, response.out()));
  EXPECT_TRUE(absl::StrContains(ReadWholeFile(log_path), "accepting connections again"));
  auto exit = (*server)->Stop();
  ASSERT_TRUE(exit.ok()) << exit.status();
  EXPECT_TRUE(exit->Clean()) << exit->ToString();
  std::remove(log_path.c_str());
}

TEST(ConnectionCapTest, ConnectionsBeyondTheCapAreClosedAtOnce) {
  constexpr int kCap = 3;
  auto server = StartWithMetrics({absl::StrCat("--max_connections=", kCap)});
  ASSERT_TRUE(server.ok()) << server.status();
  ServerProcess& process = *server->process;
  auto metric = [&](const std::string& series) -> double {
    absl::StatusOr<HttpResponse> page = HttpGet(server->metrics_port, "/metrics");
    if (!page.ok() || page->status != 200) return -1;
    return SampleValue(page->body, series).value_or(-1);
  };
  EXPECT_EQ(metric("attn_connections_limit"), kCap);

  // kCap connections, each served. Connections of the start-up health
  // checks may still count for a moment: a refused one reconnects.
  std::vector<std::unique_ptr<Stub>> held;
  for (int i = 0; i < kCap; ++i) {
    held.push_back(rpb::Attention::NewStub(process.NewChannel()));
    const grpc::Status status = GetServerInfo(*held.back(), absl::Seconds(60), true);
    ASSERT_TRUE(status.ok()) << "connection " << i << ": " << status.error_message();
  }
  EXPECT_TRUE(Eventually([&] { return metric("attn_connections_open") == kCap; }))
      << metric("attn_connections_open");

  // One more is closed as soon as it is accepted: UNAVAILABLE, not a wait.
  auto extra = rpb::Attention::NewStub(process.NewChannel());
  const absl::Time start = absl::Now();
  const grpc::Status refused = GetServerInfo(*extra, absl::Seconds(20), false);
  EXPECT_EQ(refused.error_code(), grpc::StatusCode::UNAVAILABLE) << refused.error_message();
  EXPECT_LT(absl::Now() - start, absl::Seconds(10));
  EXPECT_GE(metric("attn_connections_refused_total{reason=\"max_connections\"}"), 1);
  EXPECT_EQ(metric("attn_connections_refused_total{reason=\"no_file_descriptors\"}"), 0);

  // The held connections keep working; once one closes, a new one is served.
  for (auto& stub : held) EXPECT_TRUE(GetServerInfo(*stub, absl::Seconds(30), false).ok());
  held.pop_back();  // its channel, and so its connection, goes
  EXPECT_TRUE(Eventually([&] {
    auto fresh = rpb::Attention::NewStub(process.NewChannel());
    return GetServerInfo(*fresh, absl::Seconds(5), false).ok();
  })) << "a connection below the cap was not served after another closed";
}

}  // namespace
}  // namespace attn::testing
