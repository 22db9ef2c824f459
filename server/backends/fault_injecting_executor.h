// server/backends/fault_injecting_executor.h
//
// FaultInjectingExecutor: TEST ONLY (--test_inject_worker_faults, see
// worker_fault_spec.h). Wraps any executor (CPU, CUDA, transport_only): runs
// `good_jobs` jobs through it, then answers the next job with INTERNAL
// "injected device fault ..." without running it, writing no output, and
// reports !Healthy() from then on. That is the path a sticky CUDA error
// takes (CudaExecutor::Run): the scheduler retires the worker, the others
// keep serving, and when none is left health turns NOT_SERVING.
#ifndef ATTN_SERVER_FAULT_INJECTING_EXECUTOR_H_
#define ATTN_SERVER_FAULT_INJECTING_EXECUTOR_H_

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "core/executor.h"
#include "core/worker_fault_spec.h"

namespace attn::server {

class FaultInjectingExecutor : public JobByJobExecutor {
 public:
  // `worker` is the wrapped executor's index, for messages.
  FaultInjectingExecutor(std::unique_ptr<Executor> inner, int worker, int64_t good_jobs);

  absl::Status BindToThread() override { return inner_->BindToThread(); }
  // The inner executor's name, marked as carrying an injected fault.
  std::string Name() const override { return name_; }
  bool Healthy() const override { return !faulted_ && inner_->Healthy(); }

 private:
  // One at a time, so the fault falls on exactly the job after `good_jobs`.
  absl::Status RunJob(Job& job) override;

  const std::unique_ptr<Executor> inner_;
  const int worker_;
  const int64_t good_jobs_;
  const std::string name_;
  // Worker thread only (Run and Healthy), as the Executor contract says.
  int64_t jobs_ = 0;
  bool faulted_ = false;
};

// Wraps each executor `faults` names in a FaultInjectingExecutor and logs,
// at warning, that fault injection is on. No faults: changes nothing.
// INVALID_ARGUMENT naming the flag when a fault names a worker this server
// does not have.
absl::Status InjectWorkerFaults(const std::vector<WorkerFault>& faults,
                                std::vector<std::unique_ptr<Executor>>* executors);

}  // namespace attn::server

#endif  // ATTN_SERVER_FAULT_INJECTING_EXECUTOR_H_
