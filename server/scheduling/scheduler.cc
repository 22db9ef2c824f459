#include "scheduling/scheduler.h"

#include <utility>

#include "absl/strings/str_format.h"
#include "absl/time/clock.h"
#include "observability/log.h"

namespace attn::server {

Scheduler::Scheduler(std::vector<std::unique_ptr<Executor>> executors, int queue_capacity,
                     absl::AnyInvocable<void()> on_all_failed)
    : executors_(std::move(executors)),
      capacity_(queue_capacity),
      on_all_failed_(std::move(on_all_failed)) {
  {
    absl::MutexLock lock(&mu_);
    live_ = static_cast<int64_t>(executors_.size());
    healthy_.assign(executors_.size(), true);
  }
  threads_.reserve(executors_.size());
  for (size_t i = 0; i < executors_.size(); ++i) {
    threads_.emplace_back([this, i]() { WorkerLoop(i); });
  }
}

Scheduler::~Scheduler() {
  Stop();
  for (std::thread& thread : threads_) thread.join();
}

void Scheduler::Stop() {
  absl::MutexLock lock(&mu_);
  stopped_ = true;
}

int64_t Scheduler::live_workers() const {
  absl::MutexLock lock(&mu_);
  return live_;
}

std::vector<bool> Scheduler::worker_health() const {
  absl::MutexLock lock(&mu_);
  return healthy_;
}

Scheduler::Load Scheduler::load() const {
  absl::MutexLock lock(&mu_);
  return Load{static_cast<int64_t>(queue_.size()), running_};
}

absl::Status Scheduler::Admissible(const Job& job, absl::Time now, absl::Duration waited) {
  // Deadline first: gRPC also cancels a call whose deadline passed, and
  // that call should count as a deadline, not as a client's cancellation.
  if (now >= job.deadline) {
    return absl::DeadlineExceededError(absl::StrFormat(
        "deadline passed after %s in the queue; not run", absl::FormatDuration(waited)));
  }
  if (job.Cancelled()) {
    return absl::CancelledError(absl::StrFormat("cancelled after %s in the queue; not run",
                                                absl::FormatDuration(waited)));
  }
  return absl::OkStatus();
}

void Scheduler::Complete(std::unique_ptr<Job> job, absl::Status status) {
  // `done` lives in the job it receives: move it out before the call.
  JobDone done = std::move(job->done);
  done(std::move(job), std::move(status));
}

void Scheduler::PurgeLocked(absl::Time now, std::vector<std::pair<Entry, absl::Status>>* dropped) {
  for (auto it = queue_.begin(); it != queue_.end();) {
    absl::Status reason = Admissible(*it->job, now, now - it->enqueued);
    if (reason.ok()) {
      ++it;
      continue;
    }
    it->job->times.queue_ns = ToNanos(now - it->enqueued);
    dropped->emplace_back(std::move(*it), std::move(reason));
    it = queue_.erase(it);
  }
}

absl::Status Scheduler::Submit(std::unique_ptr<Job>& job) {
  const absl::Time now = absl::Now();
  if (now >= job->deadline) {
    return absl::DeadlineExceededError("deadline passed before the request could queue");
  }
  if (job->Cancelled()) return absl::CancelledError("cancelled before it queued");
  std::vector<std::pair<Entry, absl::Status>> dropped;
  absl::Status admitted = absl::OkStatus();
  {
    absl::MutexLock lock(&mu_);
    if (stopped_) {
      admitted = absl::UnavailableError("the server is shutting down; not accepting requests");
    } else if (live_ == 0) {
      admitted = absl::UnavailableError(
          "every worker of this server has failed (see its log); it needs a restart");
    } else {
      // Queued plus running may reach capacity plus workers: a worker that is
      // not running a job takes one at once, so it adds to the capacity.
      const auto full = [&]() {
        return static_cast<int64_t>(queue_.size()) + running_ >= capacity_ + live_;
      };
      if (full()) PurgeLocked(now, &dropped);
      if (full()) {
        admitted = absl::ResourceExhaustedError(absl::StrFormat(
            "request queue is full: %d waiting, %d running (--queue_capacity=%d); retry later",
            queue_.size(), running_, capacity_));
      } else {
        queue_.push_back(Entry{std::move(job), now});
      }
    }
  }
  // Finish dropped jobs outside the lock: their callbacks call into gRPC.
  for (auto& [entry, reason] : dropped) Complete(std::move(entry.job), std::move(reason));
  return admitted;
}

void Scheduler::WorkerLoop(size_t index) {
  Executor* executor = executors_[index].get();
  const absl::Status bound = executor->BindToThread();
  if (!bound.ok()) {
    LOGF(kError, "worker for %s cannot start: %s; its jobs will fail", executor->Name(),
         bound.ToString());
    absl::MutexLock lock(&mu_);
    healthy_[index] = false;
  }
  while (true) {
    Entry entry;
    {
      absl::MutexLock lock(&mu_);
      mu_.Await(absl::Condition(
          +[](Scheduler* s) { return !s->queue_.empty() || s->stopped_; }, this));
      if (queue_.empty()) return;  // stopped and drained
      entry = std::move(queue_.front());
      queue_.pop_front();
      ++running_;
    }
    Job& job = *entry.job;
    const absl::Time now = absl::Now();
    job.times.queue_ns = ToNanos(now - entry.enqueued);
    absl::Status status = Admissible(job, now, now - entry.enqueued);
    if (status.ok()) status = bound.ok() ? executor->Run(job) : bound;
    const bool retire = !executor->Healthy();
    std::deque<Entry> orphans;  // queued jobs nobody is left to run
    // Decided under the lock: exactly one worker, the one whose decrement
    // reached zero, fails the queue and reports that all have failed.
    bool last_to_retire = false;
    {
      absl::MutexLock lock(&mu_);
      --running_;
      if (retire) healthy_[index] = false;
      if (retire && --live_ == 0) {
        last_to_retire = true;
        orphans.swap(queue_);
      }
    }
    Complete(std::move(entry.job), std::move(status));
    if (!retire) continue;
    LOGF(kError, "retiring the worker of %s: its executor can run nothing more", executor->Name());
    for (Entry& orphan : orphans) {
      Complete(std::move(orphan.job),
               absl::UnavailableError("every worker of this server has failed (see its log); "
                                      "it needs a restart"));
    }
    if (last_to_retire && on_all_failed_ != nullptr) on_all_failed_();
    return;
  }
}

}  // namespace attn::server
