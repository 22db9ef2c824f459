// tests/support/server_process.h
//
// ServerProcess runs the built attn_server binary as a child process for
// end-to-end tests: on a free loopback port, with the caller's extra flags.
//
//   ASSERT_OK_AND_ASSIGN(auto server, ServerProcess::Start({"--backend=cpu"}));
//   auto stub = attnserve::v1::Attention::NewStub(server->NewChannel());
//   ...
//   absl::StatusOr<ServerExit> exit = server->Stop();  // SIGTERM, bounded wait
//   EXPECT_TRUE(exit->Clean());
//
// Start() runs `attn_server --listen=<listen_host>:0 --port_file=<tmp> <flags>`
// and returns once the port file exists and grpc.health.v1 reports SERVING
// for the whole server, or fails within `start_timeout` (killing the child).
// The binary is the one CMake built (ATTN_SERVER_BINARY), unless the
// environment variable ATTN_SERVER_BINARY names another. The child shares the
// test's stdout and stderr, so its log appears in the test output, and it is
// killed (SIGKILL) if the thread that started it dies first.
//
// The destructor stops a running server like Stop() and, if it has not
// exited within the stop timeout, kills it. Not thread-safe: use one
// ServerProcess from one thread (the channels it makes are thread-safe).
#ifndef ATTN_TESTS_SUPPORT_SERVER_PROCESS_H_
#define ATTN_TESTS_SUPPORT_SERVER_PROCESS_H_

#include <sys/types.h>

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "grpc/health/v1/health.pb.h"
#include "grpcpp/channel.h"
#include "grpcpp/security/credentials.h"

namespace attn::testing {

// How a child process ended.
struct ServerExit {
  bool exited = false;  // exited by itself (exit_code valid), else killed by term_signal
  int exit_code = -1;
  int term_signal = 0;

  // Exited with status 0.
  bool Clean() const { return exited && exit_code == 0; }
  // "exit code 0" or "killed by signal 9".
  std::string ToString() const;
};

class ServerProcess {
 public:
  struct Options {
    // Flags after --listen=127.0.0.1:0 and --port_file=...; may override neither.
    std::vector<std::string> flags;
    absl::Duration start_timeout = absl::Seconds(30);
    absl::Duration stop_timeout = absl::Seconds(30);
    // When set, the child's stderr (its log) goes to this file instead of
    // the test's stderr.
    std::string log_path;
    // Host of --listen (port 0); clients still connect to 127.0.0.1, so a
    // wildcard ("0.0.0.0") works too.
    std::string listen_host = "127.0.0.1";
    // What NewChannel() and Health() connect with (a TLS server needs TLS
    // credentials); null: insecure.
    std::shared_ptr<grpc::ChannelCredentials> credentials;
    // When > 0, the child's open-file limit, soft and hard (as `prlimit
    // --nofile=N:N`), so the server cannot raise it; 0: inherited.
    int max_open_files = 0;
  };

  // Starts attn_server and waits until it serves. Errors: DEADLINE_EXCEEDED
  // (not SERVING within start_timeout; the child is killed), ABORTED (the
  // child exited during start-up; the message says how), INTERNAL (spawning
  // failed).
  static absl::StatusOr<std::unique_ptr<ServerProcess>> Start(Options options);
  static absl::StatusOr<std::unique_ptr<ServerProcess>> Start(std::vector<std::string> flags = {});

  ~ServerProcess();
  ServerProcess(const ServerProcess&) = delete;
  ServerProcess& operator=(const ServerProcess&) = delete;

  // "127.0.0.1:<port>".
  const std::string& address() const { return address_; }
  int port() const { return port_; }
  pid_t pid() const { return pid_; }
  // The path of the attn_server binary this ran.
  static std::string BinaryPath();

  // A new channel to the server with message size limits raised to 1 GiB
  // both ways (tensors exceed gRPC's 4 MiB default receive limit), with
  // options.credentials, or with `credentials` when given.
  std::shared_ptr<grpc::Channel> NewChannel() const;
  std::shared_ptr<grpc::Channel> NewChannel(
      std::shared_ptr<grpc::ChannelCredentials> credentials) const;

  // grpc.health.v1 Check of `service` ("" = the whole server), with a 5 s
  // deadline; the RPC's error when the check itself fails.
  absl::StatusOr<grpc::health::v1::HealthCheckResponse::ServingStatus> Health(
      const std::string& service = "") const;

  // Sends `signal_number` to the child; FAILED_PRECONDITION after it exited.
  absl::Status Signal(int signal_number);

  // Waits up to `timeout` for the child to exit; DEADLINE_EXCEEDED if it
  // has not. Once it has exited, returns the same result every time.
  absl::StatusOr<ServerExit> Wait(absl::Duration timeout);

  // SIGTERM, then Wait(options.stop_timeout).
  absl::StatusOr<ServerExit> Stop();

  // How the child ended; nullopt while it runs (or was not yet waited for).
  std::optional<ServerExit> exit_status() const { return exit_; }

 private:
  ServerProcess() = default;
  // Reaps the child if it has exited; true if it has.
  bool Reap();

  Options options_;
  std::string temp_dir_;
  std::string port_file_;
  std::string address_;
  int port_ = 0;
  pid_t pid_ = -1;
  std::optional<ServerExit> exit_;
};

}  // namespace attn::testing

#endif  // ATTN_TESTS_SUPPORT_SERVER_PROCESS_H_
