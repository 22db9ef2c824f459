// server/frontend/call_gate.h
//
// CallGate: counts the Attend/AttendStream calls in progress and lets the
// server close the door on new ones while it drains. gRPC's own
// Server::Shutdown(deadline) also waits for idle client connections to go
// away (up to the deadline), so the server drains its calls here first and
// then shuts gRPC down at once. Thread-safe.
//
//   if (!gate.Enter()) return Refuse(UNAVAILABLE);   // in the handler
//   ... gate.Leave();                                 // when the call is done
//   gate.Close(); gate.WaitIdle(drain_timeout);       // at shutdown
#ifndef ATTN_SERVER_CALL_GATE_H_
#define ATTN_SERVER_CALL_GATE_H_

#include <cstdint>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"

namespace attn::server {

class CallGate {
 public:
  // Admits a call (true) unless the gate is closed; each admitted call must
  // Leave() exactly once.
  bool Enter() {
    absl::MutexLock lock(&mu_);
    if (closed_) return false;
    ++active_;
    return true;
  }
  void Leave() {
    absl::MutexLock lock(&mu_);
    --active_;
  }
  // Refuses every later Enter().
  void Close() {
    absl::MutexLock lock(&mu_);
    closed_ = true;
  }
  // Waits until no admitted call is left; false if `timeout` passed first.
  bool WaitIdle(absl::Duration timeout) {
    absl::MutexLock lock(&mu_);
    return mu_.AwaitWithTimeout(absl::Condition(this, &CallGate::IdleLocked), timeout);
  }
  int64_t active() const {
    absl::MutexLock lock(&mu_);
    return active_;
  }

 private:
  bool IdleLocked() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return active_ == 0; }

  mutable absl::Mutex mu_;
  int64_t active_ ABSL_GUARDED_BY(mu_) = 0;
  bool closed_ ABSL_GUARDED_BY(mu_) = false;
};

}  // namespace attn::server

#endif  // ATTN_SERVER_CALL_GATE_H_
