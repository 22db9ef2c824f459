#include "output_buffer_pool.h"

#include <utility>

namespace attn::loadgen {

std::unique_ptr<char[]> OutputBufferPool::Take() {
  {
    absl::MutexLock lock(&mu_);
    if (!free_.empty()) {
      std::unique_ptr<char[]> buffer = std::move(free_.back());
      free_.pop_back();
      return buffer;
    }
    ++allocated_;
  }
  // Uninitialized: the response overwrites every byte.
  return std::unique_ptr<char[]>(new char[bytes_]);
}

void OutputBufferPool::Give(std::unique_ptr<char[]> buffer) {
  absl::MutexLock lock(&mu_);
  free_.push_back(std::move(buffer));
}

int OutputBufferPool::allocated() const {
  absl::MutexLock lock(&mu_);
  return allocated_;
}

}  // namespace attn::loadgen
