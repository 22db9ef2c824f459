#include "limits/tcp_acceptor.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <optional>
#include <utility>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "core/log.h"

namespace attn::server {
namespace {

// How long accepting pauses after an error it cannot act on (no spare
// descriptor, no kernel memory): short, since the cause may pass at once.
constexpr absl::Duration kRetryPause = absl::Milliseconds(50);
// Refusals are logged once, then at most this often (a flood of connections
// must not become a flood of log lines).
constexpr absl::Duration kRefusalLogInterval = absl::Seconds(10);

struct HostPort {
  std::string host;  // without brackets
  int port = 0;
};

// "host:port" or "[v6]:port"; nullopt for any other form (":port" too,
// which gRPC's listener refuses).
std::optional<HostPort> SplitHostPort(absl::string_view listen) {
  const size_t colon = listen.rfind(':');
  if (colon == absl::string_view::npos) return std::nullopt;
  absl::string_view host = listen.substr(0, colon);
  if (absl::StartsWith(host, "[")) {
    if (!absl::EndsWith(host, "]")) return std::nullopt;
    host = host.substr(1, host.size() - 2);
  } else if (absl::StrContains(host, ':') || absl::StrContains(host, '/')) {
    return std::nullopt;  // a scheme such as ipv4: or unix:, or an unbracketed IPv6 address
  }
  if (host.empty()) return std::nullopt;
  HostPort result;
  const absl::string_view port = listen.substr(colon + 1);
  if (port.empty() || !std::all_of(port.begin(), port.end(), absl::ascii_isdigit) ||
      !absl::SimpleAtoi(port, &result.port)) {
    return std::nullopt;
  }
  result.host = std::string(host);
  return result;
}

std::string Errno(int error) { return std::strerror(error); }

// "127.0.0.1:50051", "[::1]:50051".
std::string AddressString(const sockaddr* address) {
  char text[INET6_ADDRSTRLEN] = "?";
  if (address->sa_family == AF_INET6) {
    const auto* v6 = reinterpret_cast<const sockaddr_in6*>(address);
    inet_ntop(AF_INET6, &v6->sin6_addr, text, sizeof(text));
    return absl::StrCat("[", text, "]:", ntohs(v6->sin6_port));
  }
  const auto* v4 = reinterpret_cast<const sockaddr_in*>(address);
  inet_ntop(AF_INET, &v4->sin_addr, text, sizeof(text));
  return absl::StrCat(text, ":", ntohs(v4->sin_port));
}

// The client's address of connection `fd`, for the log.
std::string PeerOf(int fd) {
  sockaddr_storage address{};
  socklen_t length = sizeof(address);
  if (getpeername(fd, reinterpret_cast<sockaddr*>(&address), &length) != 0) return "?";
  return AddressString(reinterpret_cast<const sockaddr*>(&address));
}

void SetPort(sockaddr_storage* address, int port) {
  if (address->ss_family == AF_INET6) {
    reinterpret_cast<sockaddr_in6*>(address)->sin6_port = htons(static_cast<uint16_t>(port));
  } else {
    reinterpret_cast<sockaddr_in*>(address)->sin_port = htons(static_cast<uint16_t>(port));
  }
}

bool IsV6Wildcard(const sockaddr_storage& address) {
  return address.ss_family == AF_INET6 &&
         IN6_IS_ADDR_UNSPECIFIED(&reinterpret_cast<const sockaddr_in6*>(&address)->sin6_addr);
}

// A listening socket on `address` (port already set); -1 with `error`.
int ListenOn(sockaddr_storage address, socklen_t length, int* error) {
  int fd = socket(address.ss_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  if (fd < 0 && errno == EAFNOSUPPORT && IsV6Wildcard(address)) {
    // No IPv6 on this host: "[::]" means every IPv4 address, as in gRPC.
    const int port = ntohs(reinterpret_cast<sockaddr_in6*>(&address)->sin6_port);
    sockaddr_in v4{};
    v4.sin_family = AF_INET;
    v4.sin_addr.s_addr = htonl(INADDR_ANY);
    v4.sin_port = htons(static_cast<uint16_t>(port));
    std::memcpy(&address, &v4, sizeof(v4));
    length = sizeof(v4);
    fd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  }
  if (fd < 0) {
    *error = errno;
    return -1;
  }
  const int one = 1;
  const int zero = 0;
  // SO_REUSEADDR: a restart binds while old connections sit in TIME_WAIT.
  // Not SO_REUSEPORT: a second server on a taken port must fail to start.
  setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
  setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
  if (IsV6Wildcard(address)) setsockopt(fd, IPPROTO_IPV6, IPV6_V6ONLY, &zero, sizeof(zero));
  if (bind(fd, reinterpret_cast<sockaddr*>(&address), length) != 0 || listen(fd, SOMAXCONN) != 0) {
    *error = errno;
    close(fd);
    return -1;
  }
  return fd;
}

}  // namespace

bool TcpAcceptor::Handles(absl::string_view listen) {
  if (absl::StartsWith(listen, "unix:") || absl::StartsWith(listen, "unix-abstract:")) {
    return false;
  }
  return SplitHostPort(listen).has_value();
}

absl::StatusOr<std::unique_ptr<TcpAcceptor>> TcpAcceptor::Listen(const std::string& listen,
                                                                 int64_t max_connections) {
  const std::optional<HostPort> host_port = SplitHostPort(listen);
  const std::string cannot = absl::StrCat("cannot listen on ", listen, " (--listen): ");
  if (!Handles(listen) || !host_port.has_value()) {
    return absl::InvalidArgumentError(absl::StrCat(cannot, "not HOST:PORT"));
  }
  if (host_port->port > 65535) {
    return absl::InvalidArgumentError(absl::StrCat(cannot, "the port must be 0 to 65535"));
  }
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = AI_PASSIVE | AI_NUMERICSERV;
  addrinfo* resolved = nullptr;
  const std::string port_text = std::to_string(host_port->port);
  const int gai = getaddrinfo(host_port->host.c_str(), port_text.c_str(), &hints, &resolved);
  if (gai != 0) {
    return absl::UnavailableError(absl::StrCat(cannot, "cannot resolve '", host_port->host,
                                               "': ", gai_strerror(gai)));
  }
  // Every address, like gRPC's listener ("localhost": 127.0.0.1 and ::1);
  // with port 0 the first picks the port and the others take the same.
  std::vector<Listener> listeners;
  std::vector<std::string> failures;
  int port = host_port->port;
  int first_error = 0;
  for (const addrinfo* a = resolved; a != nullptr; a = a->ai_next) {
    sockaddr_storage address{};
    std::memcpy(&address, a->ai_addr, a->ai_addrlen);
    SetPort(&address, port);
    int error = 0;
    const int fd = ListenOn(address, a->ai_addrlen, &error);
    if (fd < 0) {
      if (first_error == 0) first_error = error;
      failures.push_back(absl::StrCat(AddressString(reinterpret_cast<sockaddr*>(&address)), ": ",
                                      Errno(error)));
      continue;
    }
    sockaddr_storage bound{};
    socklen_t bound_length = sizeof(bound);
    getsockname(fd, reinterpret_cast<sockaddr*>(&bound), &bound_length);
    if (port == 0) {
      port = ntohs(bound.ss_family == AF_INET6
                       ? reinterpret_cast<sockaddr_in6*>(&bound)->sin6_port
                       : reinterpret_cast<sockaddr_in*>(&bound)->sin_port);
    }
    listeners.push_back({fd, AddressString(reinterpret_cast<sockaddr*>(&bound))});
  }
  freeaddrinfo(resolved);
  if (listeners.empty()) {
    return absl::UnavailableError(absl::StrCat(cannot, Errno(first_error)));
  }
  // As gRPC's listener: serve on the addresses that bound, say which did not.
  for (const std::string& failure : failures) {
    LOGF(kWarning, "--listen=%s: not listening on %s", listen, failure);
  }
  const int wake_fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
  if (wake_fd < 0) {
    const int error = errno;
    for (const Listener& l : listeners) close(l.fd);
    return absl::UnavailableError(absl::StrCat(cannot, "eventfd: ", Errno(error)));
  }
  return std::unique_ptr<TcpAcceptor>(
      new TcpAcceptor(std::move(listeners), port, max_connections, wake_fd));
}

TcpAcceptor::TcpAcceptor(std::vector<Listener> listeners, int port, int64_t max_connections,
                         int wake_fd)
    : listeners_(std::move(listeners)),
      port_(port),
      max_connections_(max_connections),
      wake_fd_(wake_fd),
      spare_fd_(open("/dev/null", O_RDONLY | O_CLOEXEC)) {}

TcpAcceptor::~TcpAcceptor() {
  Stop();
  close(wake_fd_);
  if (spare_fd_ >= 0) close(spare_fd_);
}

void TcpAcceptor::Start(std::unique_ptr<grpc::experimental::ExternalConnectionAcceptor> grpc) {
  grpc_ = std::move(grpc);
  thread_ = std::thread([this] { Run(); });
}

void TcpAcceptor::Stop() {
  if (thread_.joinable()) {
    const uint64_t one = 1;
    while (write(wake_fd_, &one, sizeof(one)) < 0 && errno == EINTR) {
    }
    thread_.join();
  }
  CloseSockets();
}

void TcpAcceptor::CloseSockets() {
  if (closed_) return;
  closed_ = true;
  for (const Listener& listener : listeners_) close(listener.fd);
}

ConnectionCounts TcpAcceptor::counts() {
  ConnectionCounts counts;
  counts.open = open_.Count();
  counts.limit = max_connections_;
  counts.refused_over_limit = refused_over_limit_.load(std::memory_order_relaxed);
  counts.refused_no_fds = refused_no_fds_.load(std::memory_order_relaxed);
  return counts;
}

void TcpAcceptor::Run() {
  std::vector<pollfd> polled;
  for (const Listener& listener : listeners_) polled.push_back({listener.fd, POLLIN, 0});
  polled.push_back({wake_fd_, POLLIN, 0});
  while (true) {
    if (poll(polled.data(), polled.size(), -1) < 0) {
      if (errno != EINTR) {
        LOGF(kError, "accepting connections: poll: %s", Errno(errno));
        Pause(kRetryPause);
      }
      continue;
    }
    if (polled.back().revents != 0) return;  // Stop()
    for (size_t i = 0; i < listeners_.size(); ++i) {
      if (polled[i].revents != 0) AcceptAll(listeners_[i]);
    }
  }
}

void TcpAcceptor::AcceptAll(const Listener& listener) {
  while (true) {
    const int fd = accept4(listener.fd, nullptr, nullptr, SOCK_NONBLOCK | SOCK_CLOEXEC);
    if (fd >= 0) {
      Admit(listener, fd);
      continue;
    }
    const int error = errno;
    switch (error) {
      case EAGAIN:
        return;
      case EINTR:
      case ECONNABORTED:  // the client gave up while waiting
      case EPROTO:
      case EPERM:  // refused by a firewall rule
        continue;
      case EMFILE:
      case ENFILE: {
        const absl::Time now = absl::Now();
        if (!out_of_fds_ || now - no_fds_logged_ >= kRefusalLogInterval) {
          LOGF(kWarning,
               "accept4 on %s: %s: out of file descriptors; refusing new connections until "
               "some close (%d refused so far; raise the open-file limit, or lower "
               "--max_connections)",
               listener.address, Errno(error),
               refused_no_fds_.load(std::memory_order_relaxed));
          no_fds_logged_ = now;
        }
        out_of_fds_ = true;
        switch (RefuseWithSpare(listener)) {
          case Refusal::kRefused:
            continue;
          case Refusal::kNoneWaiting:
            return;
          case Refusal::kNoSpare:
            Pause(kRetryPause);
            return;
        }
        return;
      }
      default: {  // ENOBUFS, ENOMEM, or worse: wait and try again
        const absl::Time now = absl::Now();
        if (now - error_logged_ >= kRefusalLogInterval) {
          LOGF(kError, "accept4 on %s: %s; retrying every %s", listener.address, Errno(error),
               absl::FormatDuration(kRetryPause));
          error_logged_ = now;
        }
        Pause(kRetryPause);
        return;
      }
    }
  }
}

TcpAcceptor::Refusal TcpAcceptor::RefuseWithSpare(const Listener& listener) {
  if (spare_fd_ < 0) spare_fd_ = open("/dev/null", O_RDONLY | O_CLOEXEC);
  if (spare_fd_ < 0) return Refusal::kNoSpare;
  close(spare_fd_);
  // Another thread may take the freed number first: then this fails too.
  const int fd = accept4(listener.fd, nullptr, nullptr, SOCK_CLOEXEC);
  const int error = errno;
  if (fd >= 0) {
    close(fd);
    refused_no_fds_.fetch_add(1, std::memory_order_relaxed);
  }
  spare_fd_ = open("/dev/null", O_RDONLY | O_CLOEXEC);
  if (fd >= 0) return Refusal::kRefused;
  return error == EAGAIN ? Refusal::kNoneWaiting : Refusal::kNoSpare;
}

void TcpAcceptor::Admit(const Listener& listener, int fd) {
  if (!open_.AddIfBelow(fd, max_connections_)) {
    const int64_t refused = refused_over_limit_.fetch_add(1, std::memory_order_relaxed) + 1;
    const absl::Time now = absl::Now();
    if (now - over_limit_logged_ >= kRefusalLogInterval) {
      LOGF(kWarning,
           "connection from %s on %s refused: --max_connections=%d connections are open (%d "
           "refused so far)",
           PeerOf(fd), listener.address, max_connections_, refused);
      over_limit_logged_ = now;
    }
    close(fd);
    return;
  }
  if (out_of_fds_) {
    LOGF(kInfo, "accepting connections again (%d refused for lack of file descriptors so far)",
         refused_no_fds_.load(std::memory_order_relaxed));
    out_of_fds_ = false;
  }
  const int one = 1;
  setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
  grpc::experimental::ExternalConnectionAcceptor::NewConnectionParameters connection;
  connection.listener_fd = listener.fd;
  connection.fd = fd;
  grpc_->HandleNewConnection(&connection);
}

void TcpAcceptor::Pause(absl::Duration how_long) {
  pollfd wake{wake_fd_, POLLIN, 0};
  poll(&wake, 1, static_cast<int>(absl::ToInt64Milliseconds(how_long)));
}

}  // namespace attn::server
