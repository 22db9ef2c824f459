// tests/sanitizers/absl_sync_tsan_annotations.cc
//
// Linked into every executable of an ATTN_SANITIZE=thread build (see
// cmake/AttnSanitize.cmake): makes the locks of the distribution's Abseil
// visible to ThreadSanitizer.
//
// Why: TSan learns "happens-before" from instrumented code and from the libc
// calls it intercepts (pthread_mutex_*, ...). Debian's libabsl_synchronization
// is not instrumented, and absl::Mutex locks with its own atomics and futex
// calls, so TSan would see no ordering between two threads that take the
// same absl::Mutex and report every field it guards as a race. Our server,
// clients and tests guard their state with absl::Mutex; gRPC (1.51,
// GPR_ABSEIL_SYNC) builds its own Mutex and CondVar on it too.
//
// How: this file defines absl::Mutex, absl::CondVar and absl::Notification
// member functions itself. An executable's definitions take precedence over
// a shared library's, for our code and for libgrpc's calls alike, so every
// call lands here; each forwards to the library's function (dlsym
// RTLD_NEXT) and tells TSan what it did: __tsan_acquire(mutex) once a lock
// is held, __tsan_release(mutex) before it is given up (Unlock, and around
// the waits of CondVar::Wait and Mutex::Await, which give it up inside).
// A Condition (Await, LockWhen) is evaluated under the lock but at times the
// library does not show us: by the waiter inside Await, or by another thread
// inside its Unlock. So each Condition is wrapped in one that acquires the
// mutex before the caller's function runs and releases it after.
//
// Limits: reader locks are treated like writer locks (one reader's unlock
// orders a later reader's lock), so a race between two threads that both
// hold only a reader lock is not reported. Lock-order checking and
// double-unlock reports are not done (those are Abseil's own debug modes).
#include <dlfcn.h>
#include <sanitizer/tsan_interface.h>

#include <cstdio>
#include <cstdlib>
#include <string>

#include "absl/synchronization/mutex.h"
#include "absl/synchronization/notification.h"
#include "absl/time/time.h"

#if !defined(__SANITIZE_THREAD__) && defined(__has_feature)
#if __has_feature(thread_sanitizer)
#define __SANITIZE_THREAD__ 1
#endif
#endif
#ifndef __SANITIZE_THREAD__
#error "absl_sync_tsan_annotations.cc belongs in ATTN_SANITIZE=thread builds only"
#endif

namespace {

#define ATTN_STRINGIFY_INNER(x) #x
#define ATTN_STRINGIFY(x) ATTN_STRINGIFY_INNER(x)

// The library's definition of absl::<ns>::<nested>, e.g. nested
// "5Mutex4LockEv" (the mangled name after the namespaces); `is_const` for
// const member functions. Exits when it is missing: a TSan run without it
// would report races that are not there.
void* Real(const char* nested, bool is_const = false) {
#if ABSL_OPTION_USE_INLINE_NAMESPACE
  const std::string ns = ATTN_STRINGIFY(ABSL_OPTION_INLINE_NAMESPACE_NAME);
  const std::string name = std::string(is_const ? "_ZNK4absl" : "_ZN4absl") +
                           std::to_string(ns.size()) + ns + nested;
#else
  const std::string name = std::string(is_const ? "_ZNK4absl" : "_ZN4absl") + nested;
#endif
  void* fn = dlsym(RTLD_NEXT, name.c_str());
  if (fn == nullptr) {
    std::fprintf(stderr, "absl_sync_tsan_annotations: %s not found in the loaded Abseil (%s)\n",
                 name.c_str(), dlerror());
    std::abort();
  }
  return fn;
}

template <typename Fn>
Fn RealAs(const char* nested, bool is_const = false) {
  return reinterpret_cast<Fn>(Real(nested, is_const));
}

// Address of Notification::notified_yet_, which its inline HasBeenNotified()
// reads with an acquire load in our (instrumented) code: it follows mutex_
// (absl/synchronization/notification.h).
const void* NotifiedFlag(const absl::Notification* n) {
  static_assert(sizeof(absl::Notification) >= sizeof(absl::Mutex) + 1,
                "absl::Notification is laid out as { Mutex mutex_; atomic<bool> notified_yet_; }");
  return reinterpret_cast<const char*>(n) + sizeof(absl::Mutex);
}

// `cond` evaluated as a critical section of `mu` (see the file comment).
//
// The evaluating thread may be another one (inside its Unlock), which reads
// this object and `cond` where the waiter wrote them, on the waiter's stack,
// with no lock of ours between them (LockWhen waits without holding `mu`).
// So condition() releases this object once it is built, and Eval acquires
// it before reading anything; and the Condition handed to the library is
// made by its void* constructor, defined in the (uninstrumented) library,
// so the library's reads of that Condition are not ours to order.
class GuardedCondition {
 public:
  GuardedCondition(const absl::Condition& cond, absl::Mutex* mu) : cond_(cond), mu_(mu) {}
  absl::Condition condition() {
    __tsan_release(this);
    return absl::Condition(&GuardedCondition::Eval, static_cast<void*>(this));
  }

 private:
  static bool Eval(void* arg) {
    __tsan_acquire(arg);
    auto* self = static_cast<GuardedCondition*>(arg);
    __tsan_acquire(self->mu_);
    const bool holds = self->cond_.Eval();
    __tsan_release(self->mu_);
    return holds;
  }
  const absl::Condition& cond_;
  absl::Mutex* const mu_;
};

}  // namespace

namespace absl {
ABSL_NAMESPACE_BEGIN

// --- Mutex: acquire once held, release before giving it up ---

void Mutex::Lock() {
  static const auto real = RealAs<void (*)(Mutex*)>("5Mutex4LockEv");
  real(this);
  __tsan_acquire(this);
}

void Mutex::ReaderLock() {
  static const auto real = RealAs<void (*)(Mutex*)>("5Mutex10ReaderLockEv");
  real(this);
  __tsan_acquire(this);
}

bool Mutex::TryLock() {
  static const auto real = RealAs<bool (*)(Mutex*)>("5Mutex7TryLockEv");
  const bool locked = real(this);
  if (locked) __tsan_acquire(this);
  return locked;
}

bool Mutex::ReaderTryLock() {
  static const auto real = RealAs<bool (*)(Mutex*)>("5Mutex13ReaderTryLockEv");
  const bool locked = real(this);
  if (locked) __tsan_acquire(this);
  return locked;
}

void Mutex::Unlock() {
  static const auto real = RealAs<void (*)(Mutex*)>("5Mutex6UnlockEv");
  __tsan_release(this);
  real(this);
}

void Mutex::ReaderUnlock() {
  static const auto real = RealAs<void (*)(Mutex*)>("5Mutex12ReaderUnlockEv");
  __tsan_release(this);
  real(this);
}

void Mutex::LockWhen(const Condition& cond) {
  static const auto real = RealAs<void (*)(Mutex*, const Condition&)>(
      "5Mutex8LockWhenERKNS0_9ConditionE");
  GuardedCondition guarded(cond, this);
  real(this, guarded.condition());
  __tsan_acquire(this);
}

void Mutex::ReaderLockWhen(const Condition& cond) {
  static const auto real = RealAs<void (*)(Mutex*, const Condition&)>(
      "5Mutex14ReaderLockWhenERKNS0_9ConditionE");
  GuardedCondition guarded(cond, this);
  real(this, guarded.condition());
  __tsan_acquire(this);
}

// The timed forms return whether the condition held; the lock is held
// either way.
bool Mutex::LockWhenWithTimeout(const Condition& cond, Duration timeout) {
  static const auto real = RealAs<bool (*)(Mutex*, const Condition&, Duration)>(
      "5Mutex19LockWhenWithTimeoutERKNS0_9ConditionENS0_8DurationE");
  GuardedCondition guarded(cond, this);
  const bool held = real(this, guarded.condition(), timeout);
  __tsan_acquire(this);
  return held;
}

bool Mutex::LockWhenWithDeadline(const Condition& cond, Time deadline) {
  static const auto real = RealAs<bool (*)(Mutex*, const Condition&, Time)>(
      "5Mutex20LockWhenWithDeadlineERKNS0_9ConditionENS0_4TimeE");
  GuardedCondition guarded(cond, this);
  const bool held = real(this, guarded.condition(), deadline);
  __tsan_acquire(this);
  return held;
}

bool Mutex::ReaderLockWhenWithTimeout(const Condition& cond, Duration timeout) {
  static const auto real = RealAs<bool (*)(Mutex*, const Condition&, Duration)>(
      "5Mutex25ReaderLockWhenWithTimeoutERKNS0_9ConditionENS0_8DurationE");
  GuardedCondition guarded(cond, this);
  const bool held = real(this, guarded.condition(), timeout);
  __tsan_acquire(this);
  return held;
}

bool Mutex::ReaderLockWhenWithDeadline(const Condition& cond, Time deadline) {
  static const auto real = RealAs<bool (*)(Mutex*, const Condition&, Time)>(
      "5Mutex26ReaderLockWhenWithDeadlineERKNS0_9ConditionENS0_4TimeE");
  GuardedCondition guarded(cond, this);
  const bool held = real(this, guarded.condition(), deadline);
  __tsan_acquire(this);
  return held;
}

// Await gives the lock up while it waits and holds it again on return.
void Mutex::Await(const Condition& cond) {
  static const auto real =
      RealAs<void (*)(Mutex*, const Condition&)>("5Mutex5AwaitERKNS0_9ConditionE");
  __tsan_release(this);
  GuardedCondition guarded(cond, this);
  real(this, guarded.condition());
  __tsan_acquire(this);
}

bool Mutex::AwaitWithTimeout(const Condition& cond, Duration timeout) {
  static const auto real = RealAs<bool (*)(Mutex*, const Condition&, Duration)>(
      "5Mutex16AwaitWithTimeoutERKNS0_9ConditionENS0_8DurationE");
  __tsan_release(this);
  GuardedCondition guarded(cond, this);
  const bool held = real(this, guarded.condition(), timeout);
  __tsan_acquire(this);
  return held;
}

bool Mutex::AwaitWithDeadline(const Condition& cond, Time deadline) {
  static const auto real = RealAs<bool (*)(Mutex*, const Condition&, Time)>(
      "5Mutex17AwaitWithDeadlineERKNS0_9ConditionENS0_4TimeE");
  __tsan_release(this);
  GuardedCondition guarded(cond, this);
  const bool held = real(this, guarded.condition(), deadline);
  __tsan_acquire(this);
  return held;
}

// --- CondVar: the wait gives `mu` up and takes it again ---

void CondVar::Wait(Mutex* mu) {
  static const auto real = RealAs<void (*)(CondVar*, Mutex*)>("7CondVar4WaitEPNS0_5MutexE");
  __tsan_release(mu);
  real(this, mu);
  __tsan_acquire(mu);
}

bool CondVar::WaitWithTimeout(Mutex* mu, Duration timeout) {
  static const auto real = RealAs<bool (*)(CondVar*, Mutex*, Duration)>(
      "7CondVar15WaitWithTimeoutEPNS0_5MutexENS0_8DurationE");
  __tsan_release(mu);
  const bool timed_out = real(this, mu, timeout);
  __tsan_acquire(mu);
  return timed_out;
}

bool CondVar::WaitWithDeadline(Mutex* mu, Time deadline) {
  static const auto real = RealAs<bool (*)(CondVar*, Mutex*, Time)>(
      "7CondVar16WaitWithDeadlineEPNS0_5MutexENS0_4TimeE");
  __tsan_release(mu);
  const bool timed_out = real(this, mu, deadline);
  __tsan_acquire(mu);
  return timed_out;
}

// --- Notification: Notify releases; a wait that saw it acquires ---
// (Its waits return early, without the mutex, once notified; and
// HasBeenNotified() is an inline acquire load of the flag.)

void Notification::Notify() {
  static const auto real = RealAs<void (*)(Notification*)>("12Notification6NotifyEv");
  __tsan_release(this);
  __tsan_release(const_cast<void*>(NotifiedFlag(this)));
  real(this);
}

void Notification::WaitForNotification() const {
  static const auto real =
      RealAs<void (*)(const Notification*)>("12Notification19WaitForNotificationEv", true);
  real(this);
  __tsan_acquire(const_cast<Notification*>(this));
}

bool Notification::WaitForNotificationWithTimeout(Duration timeout) const {
  static const auto real = RealAs<bool (*)(const Notification*, Duration)>(
      "12Notification30WaitForNotificationWithTimeoutENS0_8DurationE", true);
  const bool notified = real(this, timeout);
  if (notified) __tsan_acquire(const_cast<Notification*>(this));
  return notified;
}

bool Notification::WaitForNotificationWithDeadline(Time deadline) const {
  static const auto real = RealAs<bool (*)(const Notification*, Time)>(
      "12Notification31WaitForNotificationWithDeadlineENS0_4TimeE", true);
  const bool notified = real(this, deadline);
  if (notified) __tsan_acquire(const_cast<Notification*>(this));
  return notified;
}

ABSL_NAMESPACE_END
}  // namespace absl
