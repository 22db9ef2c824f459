// server/limits/tcp_acceptor.h
//
// TcpAcceptor: the server's own TCP listener and accept loop in front of
// gRPC, for two things gRPC 1.51's listener cannot do (issue 13):
//
//   - Keep accepting after the process runs out of file descriptors. gRPC's
//     POSIX TCP server deactivates a listener for good after one accept4()
//     fails with EMFILE (tcp_server_posix.cc treats every accept error but
//     EINTR/EAGAIN as fatal), so one burst of connections stopped the server
//     accepting until it restarted. Here, out of descriptors, the loop gives
//     up a spare descriptor to accept the waiting connection and close it at
//     once (the client is refused now instead of waiting in the backlog),
//     reopens the spare, and goes on; with no spare it retries shortly.
//   - Cap connections (--max_connections): a connection beyond the cap is
//     closed as soon as it is accepted (the client sees UNAVAILABLE), counted
//     and logged. Open connections are counted by OpenConnections (see there
//     why gRPC itself cannot tell us).
//
// Accepted sockets go to gRPC through its external connection acceptor
// (ServerBuilder::experimental().AddExternalConnectionAcceptor, FROM_FD),
// which puts them through the listener's credentials (TLS, mutual TLS, local)
// and the same HTTP/2 transport and channel arguments as gRPC's own listener.
//
// Only plain HOST:PORT addresses are handled here (a host name, an IPv4
// address or a bracketed IPv6 one; port 0 picks a free port); any other form
// (unix:, unix-abstract:, ipv4:, dns:, ...) stays with gRPC's own listener,
// without these two protections.
//
// Lifecycle: Listen() binds before the gRPC server is built (a taken port
// fails start); Start() after it started (gRPC drops connections handed to
// it before then, and leaks their descriptors); Stop() before gRPC shuts
// down, for the same reason.
#ifndef ATTN_SERVER_LIMITS_TCP_ACCEPTOR_H_
#define ATTN_SERVER_LIMITS_TCP_ACCEPTOR_H_

#include <atomic>
#include <cstdint>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "grpcpp/server_builder.h"
#include "limits/open_connections.h"
#include "observability/load_snapshot.h"

namespace attn::server {

class TcpAcceptor {
 public:
  // Whether `listen` is a plain HOST:PORT this class serves.
  static bool Handles(absl::string_view listen);

  // Binds and listens on every address `listen` resolves to (at least one
  // must bind). UNAVAILABLE naming --listen when none can be bound.
  static absl::StatusOr<std::unique_ptr<TcpAcceptor>> Listen(const std::string& listen,
                                                            int64_t max_connections);
  ~TcpAcceptor();
  TcpAcceptor(const TcpAcceptor&) = delete;
  TcpAcceptor& operator=(const TcpAcceptor&) = delete;

  // The bound port (the chosen one when `listen` asked for 0).
  int port() const { return port_; }

  // Starts the accept thread, handing connections to `grpc`.
  void Start(std::unique_ptr<grpc::experimental::ExternalConnectionAcceptor> grpc);

  // Stops accepting and closes the listening sockets (new connections are
  // refused by the kernel); connections already handed over stay gRPC's.
  void Stop();

  ConnectionCounts counts();

 private:
  struct Listener {
    int fd = -1;
    std::string address;  // for the log, e.g. "127.0.0.1:50051"
  };
  enum class Refusal { kRefused, kNoneWaiting, kNoSpare };

  TcpAcceptor(std::vector<Listener> listeners, int port, int64_t max_connections, int wake_fd);
  void Run();
  // Accepts until the backlog is empty or accepting must pause.
  void AcceptAll(const Listener& listener);
  // Hands `fd` to gRPC, or closes it at once when max_connections_ are open.
  void Admit(const Listener& listener, int fd);
  // Out of descriptors: frees the spare's to accept one waiting connection,
  // closes it, and takes the spare back.
  Refusal RefuseWithSpare(const Listener& listener);
  // Waits `how_long`, or less if Stop() is called.
  void Pause(absl::Duration how_long);
  void CloseSockets();

  const std::vector<Listener> listeners_;
  const int port_;
  const int64_t max_connections_;
  const int wake_fd_;  // eventfd: Stop() wakes the accept thread
  int spare_fd_ = -1;  // given up to accept (and refuse) when out of descriptors
  std::unique_ptr<grpc::experimental::ExternalConnectionAcceptor> grpc_;
  OpenConnections open_;
  std::atomic<int64_t> refused_over_limit_{0};
  std::atomic<int64_t> refused_no_fds_{0};
  // Accept thread only: when each kind of refusal or error was last logged,
  // and whether descriptors have run out since the last connection admitted.
  absl::Time over_limit_logged_ = absl::InfinitePast();
  absl::Time no_fds_logged_ = absl::InfinitePast();
  absl::Time error_logged_ = absl::InfinitePast();
  bool out_of_fds_ = false;
  std::thread thread_;
  bool closed_ = false;
};

}  // namespace attn::server

#endif  // ATTN_SERVER_LIMITS_TCP_ACCEPTOR_H_
