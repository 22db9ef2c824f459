#include "regions/system_region.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <string>
#include <utility>

#include "absl/strings/escaping.h"
#include "absl/strings/str_format.h"

namespace attn::server {
namespace {

class MappedShm final : public RegionMemory {
 public:
  // Takes `fd` (kept open to watch the object's size).
  MappedShm(int fd, void* map, size_t map_size, int64_t offset, int64_t size, std::string name)
      : fd_(fd), map_(map), map_size_(map_size), offset_(offset), size_(size),
        name_(std::move(name)) {}
  ~MappedShm() override {
    pin_.reset();  // unpinned before it is unmapped
    munmap(map_, map_size_);
    close(fd_);
  }
  absl::Status StillWhole() const override {
    struct stat st {};
    if (fstat(fd_, &st) != 0 || st.st_size < offset_ + size_) {
      return absl::FailedPreconditionError(absl::StrFormat(
          "the shared-memory object '%s' shrank to %d bytes under its region [%d, %d); "
          "unregister the region and register it again",
          name_, static_cast<int64_t>(st.st_size), offset_, offset_ + size_));
    }
    return absl::OkStatus();
  }
  char* data() const override { return static_cast<char*>(map_); }
  int64_t size() const override { return size_; }
  bool on_device() const override { return false; }
  void set_pin(std::unique_ptr<HostPin> pin) { pin_ = std::move(pin); }

 private:
  const int fd_;
  void* const map_;
  const size_t map_size_;
  const int64_t offset_, size_;
  const std::string name_;
  std::unique_ptr<HostPin> pin_;
};

// Closes a descriptor when it goes out of scope.
struct Fd {
  int fd = -1;
  ~Fd() {
    if (fd >= 0) close(fd);
  }
};

}  // namespace

absl::StatusOr<std::unique_ptr<RegionMemory>> MapSystemRegion(const std::string& shm_name,
                                                              int64_t offset, int64_t size,
                                                              RegionBackend& backend) {
  // shm_open's names: one leading '/', no other, at most NAME_MAX.
  if (shm_name.size() < 2 || shm_name.size() > 255 || shm_name[0] != '/' ||
      shm_name.find('/', 1) != std::string::npos || shm_name.find('\0') != std::string::npos) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "system.shm_name '%s' is not a POSIX shared-memory name: '/' and 1 to 254 characters "
        "without '/'",
        absl::CHexEscape(shm_name.substr(0, 300))));
  }
  const long page = sysconf(_SC_PAGESIZE);
  if (offset < 0 || offset % page != 0) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "system.offset is %d; it must be >= 0 and a multiple of the page size (%d)", offset, page));
  }
  if (size <= 0) {
    return absl::InvalidArgumentError(
        absl::StrFormat("system.byte_size is %d; it must be > 0", size));
  }
  Fd fd{shm_open(shm_name.c_str(), O_RDWR, 0)};
  if (fd.fd < 0) {
    const int error = errno;
    const std::string what = absl::StrFormat("system.shm_name '%s': shm_open: %s", shm_name,
                                             std::strerror(error));
    if (error == ENOENT) {
      return absl::NotFoundError(what + " (no such object on the server's host)");
    }
    if (error == EACCES || error == EPERM) return absl::PermissionDeniedError(what);
    return absl::InvalidArgumentError(what);
  }
  struct stat st {};
  if (fstat(fd.fd, &st) != 0) {
    return absl::InternalError(
        absl::StrFormat("system.shm_name '%s': fstat: %s", shm_name, std::strerror(errno)));
  }
  if (offset > st.st_size || size > st.st_size - offset) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "system region [%d, %d) is past the end of '%s', which has %d bytes (system.offset + "
        "system.byte_size must be <= the object's size)",
        offset, offset + size, shm_name, static_cast<int64_t>(st.st_size)));
  }
  const size_t map_size = static_cast<size_t>((size + page - 1) / page * page);
  void* map = mmap(nullptr, map_size, PROT_READ | PROT_WRITE, MAP_SHARED, fd.fd, offset);
  if (map == MAP_FAILED) {
    const int error = errno;
    const std::string what =
        absl::StrFormat("system.shm_name '%s': mmap of %d bytes: %s", shm_name, size,
                        std::strerror(error));
    return error == EACCES ? absl::PermissionDeniedError(what) : absl::InternalError(what);
  }
  auto memory = std::make_unique<MappedShm>(fd.fd, map, map_size, offset, size, shm_name);
  fd.fd = -1;  // the mapping's now
  absl::StatusOr<std::unique_ptr<HostPin>> pin = backend.PinHost(map, static_cast<int64_t>(map_size));
  if (!pin.ok()) return pin.status();
  memory->set_pin(*std::move(pin));
  return memory;
}

}  // namespace attn::server
