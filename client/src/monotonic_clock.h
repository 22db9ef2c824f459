// The clock client timings are measured with.
#ifndef ATTN_CLIENT_SRC_MONOTONIC_CLOCK_H_
#define ATTN_CLIENT_SRC_MONOTONIC_CLOCK_H_

#include <chrono>
#include <cstdint>

namespace attn::internal {

// Nanoseconds on a steady clock (not wall time: immune to clock steps).
inline int64_t MonotonicNanos() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

}  // namespace attn::internal

#endif  // ATTN_CLIENT_SRC_MONOTONIC_CLOCK_H_
