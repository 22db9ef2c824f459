// server/scheduling/scheduler.h
//
// Scheduler: a bounded FIFO of jobs in front of a fixed set of executors,
// each served by its own worker thread (for CUDA: one per device stream).
// Workers take the oldest job; any idle worker may take any job.
//
// Admission: Submit() never blocks and never lets the queue grow past its
// capacity. A full queue answers RESOURCE_EXHAUSTED at once (after first
// dropping queued jobs that were cancelled or whose deadline has passed).
//
// Ownership (as Triton's Scheduler::Enqueue): when Submit() returns OK the
// scheduler owns the job and calls its `done` exactly once: on a completion
// thread (completion_thread.h), while the worker runs the next job, or on
// the thread of a later Submit() that drops it; when it returns an error the
// caller keeps the job and `done` is never called. By default each worker
// has one completion thread, and its jobs complete in the order it finished
// them; with a pool (`completion_threads` > 0) the workers' finished jobs go
// to the pool's threads in turn, and may complete out of that order.
//
// A job whose client cancelled, or whose deadline passed, before a worker
// took it is not run: `done` gets CANCELLED or DEADLINE_EXCEEDED.
//
// Batching (off unless BatchPolicy::delay > 0): a worker that takes a
// stackable job (batch_key.h) whose executor can batch gathers queued jobs
// with the same batch key, oldest first, leaving the others queued in
// order, up to max_size jobs and the executor's BatchCapacityBytes(). Short
// of max_size, it waits for more until `delay` after the first job entered
// the queue, never past the deadline of a job it holds, and not after
// Stop(); Submit wakes it. Gathered jobs count as running (so towards the
// in-flight bound of queue_capacity + workers). Before the launch
// each is checked as a lone job is (cancelled or past its deadline: not
// run, `done` gets the reason); the rest run in one Executor::Run.
//
// A worker whose executor reports !Healthy() after a job retires; when the
// last one does, queued and new jobs get UNAVAILABLE and `on_all_failed`
// runs (the server reports NOT_SERVING, so an orchestrator restarts it).
#ifndef ATTN_SERVER_SCHEDULER_H_
#define ATTN_SERVER_SCHEDULER_H_

#include <atomic>
#include <cstdint>
#include <deque>
#include <memory>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/functional/any_invocable.h"
#include "absl/status/status.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "scheduling/completion_thread.h"
#include "core/executor.h"
#include "core/job.h"

namespace attn::server {

// Request batching (see above).
struct BatchPolicy {
  absl::Duration delay = absl::ZeroDuration();  // 0: every job runs alone
  int max_size = 16;                             // jobs in one launch, >= 1
};

class Scheduler {
 public:
  // Starts one worker per executor. `queue_capacity` counts waiting jobs,
  // not running ones: at most queue_capacity + workers jobs are in flight;
  // 0 admits a job only when a worker is free.
  // `completion_threads`: 0, one completion thread per worker; N > 0, a pool
  // of N shared by all workers.
  Scheduler(std::vector<std::unique_ptr<Executor>> executors, int queue_capacity,
            absl::AnyInvocable<void()> on_all_failed = nullptr, BatchPolicy batching = {},
            int completion_threads = 0);
  // Stop(), then joins the workers and their completion threads (every
  // job is completed before it returns).
  ~Scheduler();

  Scheduler(const Scheduler&) = delete;
  Scheduler& operator=(const Scheduler&) = delete;

  // Queues `job` (see the ownership rule above). Errors: RESOURCE_EXHAUSTED
  // (queue full), DEADLINE_EXCEEDED (already past its deadline), CANCELLED,
  // UNAVAILABLE (stopped).
  absl::Status Submit(std::unique_ptr<Job>& job);

  // Refuses new jobs with UNAVAILABLE; queued and running jobs still finish.
  // Returns at once; the destructor waits for the workers.
  void Stop();

  // Jobs waiting, and jobs running now, read together.
  struct Load {
    int64_t queued = 0;
    int64_t running = 0;
    // Since start: launches that stacked two or more jobs, and those jobs.
    int64_t batched_launches = 0;
    int64_t batched_requests = 0;
  };
  Load load() const;
  int workers() const { return static_cast<int>(executors_.size()); }
  // Workers not retired.
  int64_t live_workers() const;
  // Per worker, in executors() order: false once it retired, or when its
  // executor could not bind to its thread (then it fails every job).
  std::vector<bool> worker_health() const;
  int queue_capacity() const { return capacity_; }
  const std::vector<std::unique_ptr<Executor>>& executors() const { return executors_; }

 private:
  struct Entry {
    std::unique_ptr<Job> job;
    absl::Time enqueued;
  };

  void WorkerLoop(size_t index);
  // Moves queued jobs that may join `batch` (whose first job is stackable)
  // into it, oldest first, while it has room (`max_size`, `capacity` bytes
  // of the largest stacked tensor, `*bytes` of them used).
  void GatherLocked(std::vector<Entry>* batch, int64_t capacity, int64_t* bytes)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Takes the oldest job and, when batching applies, more to run with it.
  // Empty once stopped and drained.
  std::vector<Entry> TakeBatch(Executor* executor);
  // Moves queued jobs that were cancelled or are past their deadline into
  // `dropped` (with the status each will be completed with).
  void PurgeLocked(absl::Time now, std::vector<std::pair<Entry, absl::Status>>* dropped)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // The reason not to run `job`, or OK to run it.
  static absl::Status Admissible(const Job& job, absl::Time now, absl::Duration waited);
  static void Complete(std::unique_ptr<Job> job, absl::Status status);
  // Completes `job` on worker `index`'s completion thread, or on the pool's
  // next one.
  void CompleteLater(size_t index, std::unique_ptr<Job> job, absl::Status status);

  const std::vector<std::unique_ptr<Executor>> executors_;
  const int capacity_;
  absl::AnyInvocable<void()> on_all_failed_;
  const BatchPolicy batching_;

  mutable absl::Mutex mu_;
  std::deque<Entry> queue_ ABSL_GUARDED_BY(mu_);
  int64_t running_ ABSL_GUARDED_BY(mu_) = 0;
  bool stopped_ ABSL_GUARDED_BY(mu_) = false;
  int64_t live_ ABSL_GUARDED_BY(mu_) = 0;
  std::vector<bool> healthy_ ABSL_GUARDED_BY(mu_);
  // Jobs ever queued: a gathering worker waits for it to change.
  int64_t submitted_ ABSL_GUARDED_BY(mu_) = 0;
  int64_t batched_launches_ ABSL_GUARDED_BY(mu_) = 0;
  int64_t batched_requests_ ABSL_GUARDED_BY(mu_) = 0;

  // One per worker, in executors() order, or the pool; destroyed after the
  // workers are joined (declared before threads_).
  const bool completion_pool_;
  std::vector<std::unique_ptr<CompletionThread>> completions_;
  std::atomic<size_t> next_completion_{0};  // the pool's next thread
  std::vector<std::thread> threads_;
};

}  // namespace attn::server

#endif  // ATTN_SERVER_SCHEDULER_H_
