// server/scheduling/byte_budget.h
//
// ByteBudget: a counter of bytes in use against a fixed limit, for memory
// that requests hold while they are being received (AttendStream buffers).
// TryReserve either takes the bytes or leaves the budget as it was; it never
// waits. Thread-safe.
#ifndef ATTN_SERVER_BYTE_BUDGET_H_
#define ATTN_SERVER_BYTE_BUDGET_H_

#include <atomic>
#include <cstdint>

namespace attn::server {

class ByteBudget {
 public:
  explicit ByteBudget(int64_t limit) : limit_(limit) {}

  // Takes `bytes` if they fit under the limit; false (nothing taken) if not.
  bool TryReserve(int64_t bytes) {
    int64_t used = used_.load(std::memory_order_relaxed);
    do {
      if (bytes > limit_ - used) return false;
    } while (!used_.compare_exchange_weak(used, used + bytes, std::memory_order_relaxed));
    return true;
  }
  // Gives back bytes taken by TryReserve.
  void Release(int64_t bytes) { used_.fetch_sub(bytes, std::memory_order_relaxed); }

  int64_t used() const { return used_.load(std::memory_order_relaxed); }
  int64_t limit() const { return limit_; }

 private:
  const int64_t limit_;
  std::atomic<int64_t> used_{0};
};

}  // namespace attn::server

#endif  // ATTN_SERVER_BYTE_BUDGET_H_
