// server/limits/stream_watchdog.h
//
// StreamWatchdog: bounds how long an AttendStream call may hold its buffers
// while it waits on the client. One thread watches every registered call:
//
//   upload  (header and input chunks)  ends when no message arrives for
//           --stream_idle_timeout_s, or when the input is not complete
//           --stream_upload_timeout_s after the call started;
//   send    (output chunks)  ends when the client takes no chunk for
//           --stream_idle_timeout_s (flow control holds the write);
//   compute (queued or running)  is bounded by the scheduler and the
//           client's deadline, not here.
//
// Once the server drains, an upload that has received nothing for
// --drain_upload_idle_s is ended at once (0: every upload still in progress).
//
// The call owns a Watch; it updates the Watch's phase and activity with
// plain atomic stores from any thread, with no lock. The watchdog calls
// Target::Expire under its own lock, so Expire may take the call's lock but
// must never call back into the watchdog; Add and Remove must not be called
// with the call's lock held.
#ifndef ATTN_SERVER_LIMITS_STREAM_WATCHDOG_H_
#define ATTN_SERVER_LIMITS_STREAM_WATCHDOG_H_

#include <atomic>
#include <cstdint>
#include <thread>
#include <unordered_set>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"

namespace attn::server {

class StreamWatchdog {
 public:
  struct Timeouts {
    absl::Duration idle = absl::Seconds(30);
    absl::Duration upload = absl::Seconds(300);
    absl::Duration drain_upload_idle = absl::Seconds(1);
  };

  enum class Phase : int { kUpload = 0, kCompute = 1, kSend = 2, kDone = 3 };
  // Why a call is being ended.
  enum class Reason { kIdle, kUploadTimeout, kDrain };

  class Target {
   public:
    virtual ~Target() = default;
    // Ends the call (it reads its Watch's phase again under its own lock:
    // the call may have moved on since the watchdog looked). `limit` is the
    // timeout that passed.
    virtual void Expire(Reason reason, absl::Duration limit) = 0;
  };

  // A call's state as the watchdog sees it. Owned by the call.
  class Watch {
   public:
    explicit Watch(Target* target)
        : target_(target), start_ns_(absl::GetCurrentTimeNanos()), last_ns_(start_ns_) {}
    // A message arrived or an output chunk was taken.
    void Touch() { last_ns_.store(absl::GetCurrentTimeNanos(), std::memory_order_relaxed); }
    void SetPhase(Phase phase) {
      Touch();
      phase_.store(phase, std::memory_order_release);
    }
    Phase phase() const { return phase_.load(std::memory_order_acquire); }

   private:
    friend class StreamWatchdog;
    Target* const target_;
    const int64_t start_ns_;
    std::atomic<int64_t> last_ns_;
    std::atomic<Phase> phase_{Phase::kUpload};
  };

  explicit StreamWatchdog(Timeouts timeouts);
  // Stops and joins the thread.
  ~StreamWatchdog();
  StreamWatchdog(const StreamWatchdog&) = delete;
  StreamWatchdog& operator=(const StreamWatchdog&) = delete;

  void Add(Watch* watch);
  // After Remove returns, the watchdog never touches `watch` again.
  void Remove(Watch* watch);
  // The server drains: idle uploads end (see above).
  void Drain();

  const Timeouts& timeouts() const { return timeouts_; }

 private:
  void Loop();

  const Timeouts timeouts_;
  absl::Mutex mu_;
  std::unordered_set<Watch*> watches_ ABSL_GUARDED_BY(mu_);
  bool draining_ ABSL_GUARDED_BY(mu_) = false;
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  bool changed_ ABSL_GUARDED_BY(mu_) = false;
  std::thread thread_;
};

}  // namespace attn::server

#endif  // ATTN_SERVER_LIMITS_STREAM_WATCHDOG_H_
