#include "backends/fault_injecting_executor.h"

#include <utility>

#include "absl/strings/str_cat.h"
#include "core/log.h"

namespace attn::server {

FaultInjectingExecutor::FaultInjectingExecutor(std::unique_ptr<Executor> inner, int worker,
                                               int64_t good_jobs)
    : inner_(std::move(inner)),
      worker_(worker),
      good_jobs_(good_jobs),
      name_(absl::StrCat(inner_->Name(), " [test fault after ", good_jobs, " jobs]")) {}

absl::Status FaultInjectingExecutor::RunJob(Job& job) {
  if (!faulted_ && jobs_ < good_jobs_) {
    ++jobs_;
    return RunOne(*inner_, job);
  }
  if (!faulted_) {
    faulted_ = true;
    LOGF(kWarning, "%s: injecting a device fault into worker %d's job %d (%s)", kWorkerFaultFlag,
         worker_, jobs_ + 1, inner_->Name());
  }
  job.device = name_;
  return absl::InternalError(absl::StrCat(
      "injected device fault on worker ", worker_, " (", inner_->Name(), ") after ", good_jobs_,
      " jobs (", kWorkerFaultFlag, ", a test-only flag); the worker is retired"));
}

absl::Status InjectWorkerFaults(const std::vector<WorkerFault>& faults,
                                std::vector<std::unique_ptr<Executor>>* executors) {
  if (faults.empty()) return absl::OkStatus();
  const int workers = static_cast<int>(executors->size());
  for (const WorkerFault& fault : faults) {
    if (fault.worker >= workers) {
      return absl::InvalidArgumentError(absl::StrCat(kWorkerFaultFlag, " names worker ",
                                                     fault.worker, "; this server has ", workers,
                                                     " worker(s), numbered from 0"));
    }
  }
  for (const WorkerFault& fault : faults) {
    std::unique_ptr<Executor>& executor = (*executors)[static_cast<size_t>(fault.worker)];
    executor = std::make_unique<FaultInjectingExecutor>(std::move(executor), fault.worker,
                                                        fault.good_jobs);
  }
  LOGF(kWarning,
       "%s=%s: TEST-ONLY FAULT INJECTION IS ON: each named worker runs that many jobs, then "
       "fails the next with INTERNAL and retires, like a GPU with a sticky error. Never use "
       "this flag in production",
       kWorkerFaultFlag, FormatWorkerFaults(faults));
  return absl::OkStatus();
}

}  // namespace attn::server
