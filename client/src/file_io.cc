#include "file_io.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>

#include "absl/strings/str_cat.h"

namespace attn::internal {
namespace {

// Closes the descriptor on every path out.
struct Fd {
  int fd;
  ~Fd() {
    if (fd >= 0) close(fd);
  }
};

absl::Status Failed(const char* what, const std::string& path) {
  return absl::ErrnoToStatus(errno, absl::StrCat(what, " '", path, "'"));
}

}  // namespace

absl::StatusOr<std::string> ReadWholeFile(const std::string& path) {
  const Fd file{open(path.c_str(), O_RDONLY | O_CLOEXEC)};
  if (file.fd < 0) return Failed("cannot open", path);
  std::string contents;
  char buffer[1 << 16];
  for (;;) {
    const ssize_t n = read(file.fd, buffer, sizeof(buffer));
    if (n == 0) return contents;
    if (n < 0) {
      if (errno == EINTR) continue;
      return Failed("cannot read", path);
    }
    contents.append(buffer, static_cast<size_t>(n));
  }
}

absl::Status WriteWholeFile(const std::string& path, absl::string_view contents) {
  Fd file{open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644)};
  if (file.fd < 0) return Failed("cannot write", path);
  while (!contents.empty()) {
    const ssize_t n = write(file.fd, contents.data(), contents.size());
    if (n < 0) {
      if (errno == EINTR) continue;
      return Failed("error writing", path);
    }
    contents.remove_prefix(static_cast<size_t>(n));
  }
  const int fd = file.fd;
  file.fd = -1;
  if (close(fd) != 0) return Failed("error writing", path);
  return absl::OkStatus();
}

}  // namespace attn::internal
