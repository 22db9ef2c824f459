// tests/sanitizers/absl_sync_annotations_test.cc
//
// A thread that waits on an absl::Mutex with a Condition while another
// thread holds the lock queues without evaluating it; the holder's Unlock
// then evaluates the waiter's Condition, reading what the waiter built on
// its own stack. absl_sync_tsan_annotations.cc must order those reads after
// the waiter's writes, or TSan reports a race that is not there (as it did
// in CI: a Notification waited for while its Notify held the lock). The
// sleeps only make that interleaving likely; the tests pass either way.
#include <chrono>
#include <thread>

#include "absl/synchronization/mutex.h"
#include "absl/synchronization/notification.h"
#include "absl/time/time.h"
#include "gtest/gtest.h"

namespace {

bool IsSet(bool* flag) { return *flag; }

constexpr auto kLetTheWaiterQueue = std::chrono::milliseconds(20);

TEST(AbslSyncAnnotationsTest, LockWhenQueuedWhileHeldIsWokenByTheUnlock) {
  for (int round = 0; round < 3; ++round) {
    absl::Mutex mu;
    bool ready = false;  // guarded by mu
    int seen = 0;        // guarded by mu
    mu.Lock();
    std::thread waiter([&] {
      // The Condition and what it reads live on the waiter's stack; the
      // unlocking thread reads them.
      struct Wanted {
        const bool* ready;
        int round;
      } wanted{&ready, round};
      mu.LockWhen(absl::Condition(
          +[](Wanted* w) { return *w->ready && w->round >= 0; }, &wanted));
      ++seen;
      mu.Unlock();
    });
    std::this_thread::sleep_for(kLetTheWaiterQueue);
    ready = true;
    mu.Unlock();
    waiter.join();
    absl::MutexLock lock(&mu);
    EXPECT_EQ(seen, 1);
  }
}

TEST(AbslSyncAnnotationsTest, TimedLockWhenQueuedWhileHeldSeesTheCondition) {
  absl::Mutex mu;
  bool ready = false;  // guarded by mu
  bool held = false;
  mu.Lock();
  std::thread waiter([&] {
    held = mu.LockWhenWithTimeout(absl::Condition(&IsSet, &ready), absl::Seconds(60));
    mu.Unlock();
  });
  std::this_thread::sleep_for(kLetTheWaiterQueue);
  ready = true;
  mu.Unlock();
  waiter.join();
  EXPECT_TRUE(held);
}

TEST(AbslSyncAnnotationsTest, AwaitIsWokenByAnotherThreadsUnlock) {
  absl::Mutex mu;
  bool ready = false;  // guarded by mu
  int awaited = 0;     // guarded by mu
  std::thread waiter([&] {
    absl::MutexLock lock(&mu);
    mu.Await(absl::Condition(&IsSet, &ready));
    ++awaited;
  });
  std::this_thread::sleep_for(kLetTheWaiterQueue);
  {
    absl::MutexLock lock(&mu);
    ready = true;
  }
  waiter.join();
  absl::MutexLock lock(&mu);
  EXPECT_EQ(awaited, 1);
}

TEST(AbslSyncAnnotationsTest, NotificationWaitedForFromAnotherThread) {
  for (int round = 0; round < 20; ++round) {
    absl::Notification started, done;
    int value = 0;
    std::thread waiter([&] {
      started.Notify();
      done.WaitForNotification();
      EXPECT_EQ(value, 42);
    });
    started.WaitForNotification();
    value = 42;
    done.Notify();
    waiter.join();
  }
}

}  // namespace
