#include "limits/stream_watchdog.h"

#include <algorithm>

namespace attn::server {
namespace {

// The watchdog looks at least this often, so a call that moves from compute
// back to a watched phase is seen without being announced.
constexpr absl::Duration kMaxSleep = absl::Milliseconds(250);

}  // namespace

StreamWatchdog::StreamWatchdog(Timeouts timeouts) : timeouts_(timeouts) {
  thread_ = std::thread([this]() { Loop(); });
}

StreamWatchdog::~StreamWatchdog() {
  {
    absl::MutexLock lock(&mu_);
    stopping_ = true;
    changed_ = true;
  }
  thread_.join();
}

void StreamWatchdog::Add(Watch* watch) {
  absl::MutexLock lock(&mu_);
  watches_.insert(watch);
  changed_ = true;
}

void StreamWatchdog::Remove(Watch* watch) {
  absl::MutexLock lock(&mu_);
  watches_.erase(watch);
}

void StreamWatchdog::Drain() {
  absl::MutexLock lock(&mu_);
  draining_ = true;
  changed_ = true;
}

void StreamWatchdog::Loop() {
  absl::MutexLock lock(&mu_);
  while (!stopping_) {
    const absl::Time now = absl::Now();
    absl::Time next = now + kMaxSleep;
    for (Watch* w : watches_) {
      const Phase phase = w->phase();
      if (phase == Phase::kCompute || phase == Phase::kDone) continue;
      const absl::Time last = absl::FromUnixNanos(w->last_ns_.load(std::memory_order_relaxed));
      const absl::Time start = absl::FromUnixNanos(w->start_ns_);
      // The earliest limit that applies, and which one it is.
      Reason reason = Reason::kIdle;
      absl::Duration limit = timeouts_.idle;
      absl::Time due = last + timeouts_.idle;
      if (phase == Phase::kUpload) {
        if (start + timeouts_.upload < due) {
          reason = Reason::kUploadTimeout;
          limit = timeouts_.upload;
          due = start + timeouts_.upload;
        }
        if (draining_ && last + timeouts_.drain_upload_idle < due) {
          reason = Reason::kDrain;
          limit = timeouts_.drain_upload_idle;
          due = last + timeouts_.drain_upload_idle;
        }
      }
      if (now >= due) {
        w->target_->Expire(reason, limit);
      } else {
        next = std::min(next, due);
      }
    }
    changed_ = false;
    mu_.AwaitWithDeadline(absl::Condition(&changed_), next);
  }
}

}  // namespace attn::server
