#include "scheduling/completion_thread.h"

#include <utility>

namespace attn::server {

CompletionThread::CompletionThread() : thread_([this] { Loop(); }) {}

CompletionThread::~CompletionThread() {
  {
    absl::MutexLock lock(&mu_);
    stopping_ = true;
  }
  thread_.join();
}

void CompletionThread::Post(absl::AnyInvocable<void() &&> fn) {
  absl::MutexLock lock(&mu_);
  pending_.push_back(std::move(fn));
}

void CompletionThread::Loop() {
  while (true) {
    absl::AnyInvocable<void() &&> fn;
    {
      absl::MutexLock lock(&mu_);
      mu_.Await(absl::Condition(
          +[](CompletionThread* t) ABSL_EXCLUSIVE_LOCKS_REQUIRED(t->mu_) {
            return t->stopping_ || !t->pending_.empty();
          },
          this));
      if (pending_.empty()) return;  // stopping, and everything ran
      fn = std::move(pending_.front());
      pending_.pop_front();
    }
    std::move(fn)();
  }
}

}  // namespace attn::server
