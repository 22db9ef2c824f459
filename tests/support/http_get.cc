#include "http_get.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/time/clock.h"

namespace attn::testing {
namespace {

// Closes a file descriptor when it goes out of scope.
struct Fd {
  int fd = -1;
  ~Fd() {
    if (fd >= 0) close(fd);
  }
};

sockaddr_in Loopback(int port) {
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_port = htons(static_cast<uint16_t>(port));
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  return address;
}

// Waits until `fd` is ready for `events` or `deadline` passes.
bool WaitReady(int fd, short events, absl::Time deadline) {
  while (true) {
    const int64_t left_ms = absl::ToInt64Milliseconds(deadline - absl::Now());
    if (left_ms <= 0) return false;
    pollfd p{fd, events, 0};
    const int ready = poll(&p, 1, static_cast<int>(left_ms));
    if (ready > 0) return true;
    if (ready < 0 && errno != EINTR) return false;
  }
}

}  // namespace

absl::StatusOr<HttpResponse> HttpGet(int port, const std::string& target, absl::Duration timeout) {
  const absl::Time deadline = absl::Now() + timeout;
  Fd socket_fd{socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0)};
  if (socket_fd.fd < 0) return absl::InternalError(absl::StrCat("socket: ", strerror(errno)));
  const sockaddr_in address = Loopback(port);
  if (connect(socket_fd.fd, reinterpret_cast<const sockaddr*>(&address), sizeof(address)) != 0) {
    return absl::UnavailableError(
        absl::StrCat("connect to 127.0.0.1:", port, ": ", strerror(errno)));
  }
  const std::string request =
      absl::StrCat("GET ", target, " HTTP/1.0\r\nHost: 127.0.0.1:", port, "\r\n\r\n");
  size_t sent = 0;
  while (sent < request.size()) {
    if (!WaitReady(socket_fd.fd, POLLOUT, deadline)) {
      return absl::DeadlineExceededError(absl::StrCat("sending GET ", target));
    }
    const ssize_t n =
        send(socket_fd.fd, request.data() + sent, request.size() - sent, MSG_NOSIGNAL);
    if (n < 0 && errno != EINTR)
      return absl::InternalError(absl::StrCat("send: ", strerror(errno)));
    if (n > 0) sent += static_cast<size_t>(n);
  }
  std::string raw;
  char buffer[8192];
  while (true) {
    if (!WaitReady(socket_fd.fd, POLLIN, deadline)) {
      return absl::DeadlineExceededError(absl::StrCat("reading the answer to GET ", target));
    }
    const ssize_t n = recv(socket_fd.fd, buffer, sizeof(buffer), 0);
    if (n == 0) break;
    if (n < 0 && errno != EINTR)
      return absl::InternalError(absl::StrCat("recv: ", strerror(errno)));
    if (n > 0) raw.append(buffer, static_cast<size_t>(n));
  }
  // "HTTP/1.x 200 OK\r\n...\r\n\r\nbody"
  const size_t header_end = raw.find("\r\n\r\n");
  const size_t first_space = raw.find(' ');
  HttpResponse response;
  if (header_end == std::string::npos || first_space == std::string::npos ||
      !absl::SimpleAtoi(raw.substr(first_space + 1, 3), &response.status)) {
    return absl::InternalError(
        absl::StrCat("GET ", target, ": not an HTTP answer: ", raw.substr(0, 200)));
  }
  response.body = raw.substr(header_end + 4);
  return response;
}

std::string UrlEncode(const std::string& value) {
  std::string out;
  for (unsigned char c : value) {
    if (absl::ascii_isalnum(c) || c == '-' || c == '_' || c == '.' || c == '~') {
      out.push_back(static_cast<char>(c));
    } else {
      absl::StrAppendFormat(&out, "%%%02X", c);
    }
  }
  return out;
}

absl::StatusOr<int> FreeLoopbackPort() {
  Fd socket_fd{socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0)};
  if (socket_fd.fd < 0) return absl::InternalError(absl::StrCat("socket: ", strerror(errno)));
  sockaddr_in address = Loopback(0);
  socklen_t length = sizeof(address);
  if (bind(socket_fd.fd, reinterpret_cast<sockaddr*>(&address), sizeof(address)) != 0 ||
      getsockname(socket_fd.fd, reinterpret_cast<sockaddr*>(&address), &length) != 0) {
    return absl::InternalError(absl::StrCat("binding 127.0.0.1:0: ", strerror(errno)));
  }
  return static_cast<int>(ntohs(address.sin_port));
}

}  // namespace attn::testing
