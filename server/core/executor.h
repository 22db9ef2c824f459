// server/core/executor.h
//
// Executor: runs jobs on one compute resource (a CUDA stream with its
// buffers, or a set of CPU threads). The scheduler gives each executor its
// own worker thread and calls Run() there, one call at a time, so an
// executor needs no locking of its own state.
#ifndef ATTN_SERVER_CORE_EXECUTOR_H_
#define ATTN_SERVER_CORE_EXECUTOR_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/types/span.h"
#include "core/job.h"

namespace attn::server {

class Executor {
 public:
  virtual ~Executor() = default;

  // Called once on the executor's worker thread before its first Run (a
  // CUDA executor makes its device current here).
  virtual absl::Status BindToThread() { return absl::OkStatus(); }

  // Computes `jobs` (each has passed admission): one job, or several the
  // scheduler gathered with one batch key (core/batch_key.h), which the
  // executor runs as one launch stacked along batch when they fit it
  // together, else one by one. Writes each job's outputs where its
  // destinations say (or lends `job.lent`), fills job.times.{h2d,kernel,
  // d2h}_ns and job.device; a launch shared by n > 1 jobs sets each one's
  // times.batch_size to n and gives each the whole launch's times. Blocks
  // until the outputs are where they go. Returns one status per job, in
  // order. Errors: INVALID_ARGUMENT if the kernel rejects the arguments,
  // INTERNAL for device failures.
  virtual std::vector<absl::Status> Run(absl::Span<Job* const> jobs) = 0;

  // The most bytes one stacked tensor (Q and O, or K and V) of a launch may
  // have (StackedBytes summed over its jobs); 0: the scheduler never
  // gathers a batch for this executor.
  virtual int64_t BatchCapacityBytes() const { return 0; }

  // What this executor runs on, e.g. "NVIDIA H200 (cuda:0, stream 1)".
  virtual std::string Name() const = 0;

  // False once the executor can run nothing more (e.g. a sticky CUDA error
  // such as an illegal address poisons the device's context until the
  // process exits); the scheduler then retires its worker.
  virtual bool Healthy() const { return true; }
};

// An executor that runs the jobs of a span one at a time, in order, never
// stacked (the transport-only mode, the fault injector, test fakes).
class JobByJobExecutor : public Executor {
 public:
  std::vector<absl::Status> Run(absl::Span<Job* const> jobs) final {
    std::vector<absl::Status> statuses;
    statuses.reserve(jobs.size());
    for (Job* job : jobs) statuses.push_back(RunJob(*job));
    return statuses;
  }

 protected:
  virtual absl::Status RunJob(Job& job) = 0;
};

// Runs `job` alone: a span of one.
inline absl::Status RunOne(Executor& executor, Job& job) {
  Job* one[] = {&job};
  std::vector<absl::Status> statuses = executor.Run(one);
  return statuses.size() == 1 ? statuses.front()
                              : absl::InternalError("an executor returned no status for a job");
}

}  // namespace attn::server

#endif  // ATTN_SERVER_CORE_EXECUTOR_H_
