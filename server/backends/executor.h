// server/backends/executor.h
//
// Executor: runs jobs on one compute resource (a CUDA stream with its
// buffers, or a set of CPU threads). The scheduler gives each executor its
// own worker thread and calls Run() (or RunBatch()) there, one call at a
// time, so an executor needs no locking of its own state.
#ifndef ATTN_SERVER_EXECUTOR_H_
#define ATTN_SERVER_EXECUTOR_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/types/span.h"
#include "scheduling/job.h"

namespace attn::server {

class Executor {
 public:
  virtual ~Executor() = default;

  // Called once on the executor's worker thread before its first Run (a
  // CUDA executor makes its device current here).
  virtual absl::Status BindToThread() { return absl::OkStatus(); }

  // Computes `job` (job.spec has passed the front end's checks): writes O to
  // *job.out (or, when job.takes_output_buffer, may set job.output instead),
  // fills job.times.{h2d,kernel,d2h}_ns and job.device. Blocks
  // until the output is in host memory. Errors: INVALID_ARGUMENT if the
  // kernel rejects the arguments, INTERNAL for device failures.
  virtual absl::Status Run(Job& job) = 0;

  // Computes `jobs`, which share one batch key and are each Stackable
  // (scheduling/batch_key.h), as Run would each, ideally as one launch
  // stacked along batch. Returns one status per job, in order. An executor
  // that stacked n jobs into one launch sets each one's times.batch_size to
  // n and gives each the whole launch's h2d, kernel and d2h times. The
  // default runs them one by one (batch_size stays 0).
  virtual std::vector<absl::Status> RunBatch(absl::Span<Job* const> jobs) {
    std::vector<absl::Status> statuses;
    statuses.reserve(jobs.size());
    for (Job* job : jobs) statuses.push_back(Run(*job));
    return statuses;
  }

  // The most bytes one stacked tensor (Q and O, or K and V) of a RunBatch
  // may have (StackedBytes summed over its jobs); 0: the scheduler never
  // gathers a batch for this executor.
  virtual int64_t BatchCapacityBytes() const { return 0; }

  // What this executor runs on, e.g. "NVIDIA H200 (cuda:0, stream 1)".
  virtual std::string Name() const = 0;

  // False once the executor can run nothing more (e.g. a sticky CUDA error
  // such as an illegal address poisons the device's context until the
  // process exits); the scheduler then retires its worker.
  virtual bool Healthy() const { return true; }
};

}  // namespace attn::server

#endif  // ATTN_SERVER_EXECUTOR_H_
