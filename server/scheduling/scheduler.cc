#include "scheduling/scheduler.h"

#include <algorithm>
#include <utility>

#include "absl/strings/str_format.h"
#include "absl/time/clock.h"
#include "core/log.h"
#include "core/batch_key.h"

namespace attn::server {

Scheduler::Scheduler(std::vector<std::unique_ptr<Executor>> executors, int queue_capacity,
                     absl::AnyInvocable<void()> on_all_failed, BatchPolicy batching,
                     int completion_threads)
    : executors_(std::move(executors)),
      capacity_(queue_capacity),
      on_all_failed_(std::move(on_all_failed)),
      batching_(batching),
      completion_pool_(completion_threads > 0) {
  {
    absl::MutexLock lock(&mu_);
    live_ = static_cast<int64_t>(executors_.size());
    healthy_.assign(executors_.size(), true);
  }
  const size_t completions =
      completion_pool_ ? static_cast<size_t>(completion_threads) : executors_.size();
  completions_.reserve(completions);
  for (size_t i = 0; i < completions; ++i) {
    completions_.push_back(std::make_unique<CompletionThread>());
  }
  threads_.reserve(executors_.size());
  for (size_t i = 0; i < executors_.size(); ++i) {
    threads_.emplace_back([this, i]() { WorkerLoop(i); });
  }
}

Scheduler::~Scheduler() {
  Stop();
  for (std::thread& thread : threads_) thread.join();
  completions_.clear();  // runs the completions the workers posted last
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
  return Load{static_cast<int64_t>(queue_.size()), running_, batched_launches_,
              batched_requests_};
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

void Scheduler::CompleteLater(size_t index, std::unique_ptr<Job> job, absl::Status status) {
  const size_t thread =
      completion_pool_
          ? next_completion_.fetch_add(1, std::memory_order_relaxed) % completions_.size()
          : index;
  completions_[thread]->Post([job = std::move(job), status = std::move(status)]() mutable {
    Complete(std::move(job), std::move(status));
  });
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
        ++submitted_;
      }
    }
  }
  // Finish dropped jobs outside the lock: their callbacks call into gRPC.
  for (auto& [entry, reason] : dropped) Complete(std::move(entry.job), std::move(reason));
  return admitted;
}

void Scheduler::GatherLocked(std::vector<Entry>* batch, int64_t capacity, int64_t* bytes) {
  const absl::Time now = absl::Now();
  const RequestSpec& key = batch->front().job->spec;
  const size_t max_size = static_cast<size_t>(batching_.max_size);
  for (auto it = queue_.begin(); it != queue_.end() && batch->size() < max_size;) {
    const Job& job = *it->job;
    const int64_t more = StackedBytes(job.spec);
    // Jobs that cannot join stay where they are, in order; so do cancelled
    // or expired ones (the next worker or purge to see them completes them).
    if (!Stackable(job) || !SameBatchKey(key, job.spec) || *bytes + more > capacity ||
        !Admissible(job, now, now - it->enqueued).ok()) {
      ++it;
      continue;
    }
    *bytes += more;
    batch->push_back(std::move(*it));
    it = queue_.erase(it);
    ++running_;
  }
}

std::vector<Scheduler::Entry> Scheduler::TakeBatch(Executor* executor) {
  std::vector<Entry> batch;
  absl::MutexLock lock(&mu_);
  mu_.Await(absl::Condition(
      +[](Scheduler* s) { return !s->queue_.empty() || s->stopped_; }, this));
  if (queue_.empty()) return batch;  // stopped and drained
  batch.push_back(std::move(queue_.front()));
  queue_.pop_front();
  ++running_;

  const Job& first = *batch.front().job;
  const int64_t capacity = executor->BatchCapacityBytes();
  int64_t bytes = StackedBytes(first.spec);
  if (batching_.delay <= absl::ZeroDuration() || batching_.max_size < 2 || capacity <= 0 ||
      !Stackable(first) || bytes > capacity) {
    return batch;
  }
  GatherLocked(&batch, capacity, &bytes);
  const size_t max_size = static_cast<size_t>(batching_.max_size);
  absl::Time until = batch.front().enqueued + batching_.delay;
  // Wakes on a new job or Stop(); a job taken by another worker meanwhile is
  // simply not seen.
  struct Wait {
    Scheduler* scheduler;
    int64_t seen;
  };
  while (batch.size() < max_size && !stopped_) {
    for (const Entry& entry : batch) until = std::min(until, entry.job->deadline);
    if (absl::Now() >= until) break;
    Wait wait{this, submitted_};
    mu_.AwaitWithDeadline(absl::Condition(
                              +[](Wait* w) {
                                return w->scheduler->submitted_ != w->seen ||
                                       w->scheduler->stopped_;
                              },
                              &wait),
                          until);
    GatherLocked(&batch, capacity, &bytes);
  }
  return batch;
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
    std::vector<Entry> batch = TakeBatch(executor);
    if (batch.empty()) return;  // stopped and drained
    // Every job is checked as a lone one is; those still wanted run
    // together (or alone, as before batching, when only one is).
    const absl::Time now = absl::Now();
    std::vector<absl::Status> statuses(batch.size());
    std::vector<Job*> runnable;
    std::vector<size_t> positions;
    for (size_t i = 0; i < batch.size(); ++i) {
      Job& job = *batch[i].job;
      job.times.queue_ns = ToNanos(now - batch[i].enqueued);
      statuses[i] = Admissible(job, now, now - batch[i].enqueued);
      if (statuses[i].ok() && !bound.ok()) statuses[i] = bound;
      if (!statuses[i].ok()) continue;
      runnable.push_back(&job);
      positions.push_back(i);
    }
    if (!runnable.empty()) {
      std::vector<absl::Status> results = executor->Run(runnable);
      for (size_t k = 0; k < positions.size(); ++k) {
        statuses[positions[k]] =
            k < results.size()
                ? std::move(results[k])
                : absl::InternalError(absl::StrFormat(
                      "%s returned %d statuses for %d jobs", executor->Name(), results.size(),
                      runnable.size()));
      }
    }
    int64_t stacked = 0;
    for (const Job* job : runnable) stacked += job->times.batch_size > 1 ? 1 : 0;
    const bool retire = !executor->Healthy();
    std::deque<Entry> orphans;  // queued jobs nobody is left to run
    // Decided under the lock: exactly one worker, the one whose decrement
    // reached zero, fails the queue and reports that all have failed.
    bool last_to_retire = false;
    {
      absl::MutexLock lock(&mu_);
      running_ -= static_cast<int64_t>(batch.size());
      if (stacked > 0) {
        ++batched_launches_;
        batched_requests_ += stacked;
      }
      if (retire) healthy_[index] = false;
      if (retire && --live_ == 0) {
        last_to_retire = true;
        orphans.swap(queue_);
      }
    }
    for (size_t i = 0; i < batch.size(); ++i) {
      CompleteLater(index, std::move(batch[i].job), std::move(statuses[i]));
    }
    if (!retire) continue;
    LOGF(kError, "retiring the worker of %s: its executor can run nothing more", executor->Name());
    for (Entry& orphan : orphans) {
      CompleteLater(index, std::move(orphan.job),
                    absl::UnavailableError("every worker of this server has failed (see its "
                                           "log); it needs a restart"));
    }
    if (last_to_retire && on_all_failed_ != nullptr) on_all_failed_();
    return;
  }
}

}  // namespace attn::server
