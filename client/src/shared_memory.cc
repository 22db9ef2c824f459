#include "attn/client/shared_memory.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstring>

#include "absl/strings/str_cat.h"

namespace attn {

absl::StatusOr<std::unique_ptr<SharedMemory>> SharedMemory::Create(int64_t bytes,
                                                                   std::string name) {
  if (bytes <= 0) {
    return absl::InvalidArgumentError(absl::StrCat("shared memory of ", bytes, " bytes"));
  }
  if (name.empty()) {
    static std::atomic<int> next{0};
    name = absl::StrCat("/attn-", getpid(), "-", next.fetch_add(1));
  }
  const int fd = shm_open(name.c_str(), O_RDWR | O_CREAT | O_EXCL, 0600);
  if (fd < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("shm_open(", name, "): ", std::strerror(errno)));
  }
  if (ftruncate(fd, bytes) != 0) {
    const int error = errno;
    close(fd);
    shm_unlink(name.c_str());
    return absl::ResourceExhaustedError(absl::StrCat("ftruncate(", name, ", ", bytes,
                                                     "): ", std::strerror(error)));
  }
  void* data = mmap(nullptr, static_cast<size_t>(bytes), PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  const int error = errno;
  close(fd);  // the mapping keeps the object
  if (data == MAP_FAILED) {
    shm_unlink(name.c_str());
    return absl::ResourceExhaustedError(
        absl::StrCat("mmap(", name, ", ", bytes, "): ", std::strerror(error)));
  }
  return std::unique_ptr<SharedMemory>(
      new SharedMemory(std::move(name), static_cast<char*>(data), bytes));
}

SharedMemory::~SharedMemory() {
  munmap(data_, static_cast<size_t>(size_));
  shm_unlink(name_.c_str());
}

}  // namespace attn
