#include "backends/launch_plan.h"

#include <utility>

#include "absl/strings/str_format.h"
#include "attn/validate.h"
#include "core/batch_key.h"
#include "core/log.h"

namespace attn::server {

LaunchPlan::LaunchPlan(absl::Span<Job* const> jobs) : jobs_(jobs.begin(), jobs.end()) {
  spec_ = jobs_.front()->spec;
  spec_.problem = StackedProblem(jobs);
  int64_t q_at = 0, kv_at = 0, lse_at = 0;
  for (Job* job : jobs_) {
    const RequestSpec& s = job->spec;
    inputs_[0].push_back({job, &job->q, q_at});
    inputs_[1].push_back({job, &job->k, kv_at});
    inputs_[2].push_back({job, &job->v, kv_at});
    out_.push_back({job, &job->out, q_at, s.QBytes()});
    if (s.problem.return_lse) lse_.push_back({job, &job->lse, lse_at, s.LseBytes()});
    q_at += s.QBytes();
    kv_at += s.KVBytes();
    lse_at += s.LseBytes();
  }
}

LaunchPlan LaunchPlan::Lone(Job& job) {
  Job* one[] = {&job};
  return LaunchPlan(one);
}

absl::StatusOr<LaunchPlan> LaunchPlan::Stacked(absl::Span<Job* const> jobs,
                                               const LaunchCapacity& capacity) {
  if (jobs.empty()) return absl::InternalError("a launch plan of no jobs");
  const RequestSpec& key = jobs.front()->spec;
  for (const Job* job : jobs) {
    if (!Stackable(*job) || !SameBatchKey(key, job->spec)) {
      return absl::InternalError("given jobs that cannot be stacked");
    }
  }
  LaunchPlan plan(jobs);
  if (plan.q_bytes() > capacity.tensor_bytes || plan.kv_bytes() > capacity.tensor_bytes ||
      plan.lse_bytes() > capacity.lse_bytes) {
    return absl::ResourceExhaustedError(
        absl::StrFormat("stacked problem %s exceeds the buffers (--max_tokens_per_request)",
                        plan.spec_.problem.ToString()));
  }
  if (absl::Status valid = ValidateProblem(plan.spec_.problem, key.kernel_info()); !valid.ok()) {
    return valid;
  }
  return plan;
}

void LaunchPlan::SetTimes(int64_t h2d_ns, int64_t kernel_ns, int64_t d2h_ns,
                          absl::string_view device) const {
  for (Job* job : jobs_) {
    job->times.h2d_ns = h2d_ns;
    job->times.kernel_ns = kernel_ns;
    job->times.d2h_ns = d2h_ns;
    job->times.batch_size = stacked() ? static_cast<int64_t>(jobs_.size()) : 0;
    job->device = std::string(device);
  }
}

std::vector<absl::Status> RunPlanned(absl::Span<Job* const> jobs, const LaunchCapacity& capacity,
                                     absl::string_view executor,
                                     absl::FunctionRef<absl::Status(const LaunchPlan&)> run) {
  if (jobs.size() > 1) {
    absl::StatusOr<LaunchPlan> plan = LaunchPlan::Stacked(jobs, capacity);
    if (plan.ok()) return std::vector<absl::Status>(jobs.size(), run(*plan));
    LOGF(kWarning, "%s runs a batch of %d one by one: %s", executor, jobs.size(),
         plan.status().message());
  }
  std::vector<absl::Status> statuses;
  statuses.reserve(jobs.size());
  for (Job* job : jobs) statuses.push_back(run(LaunchPlan::Lone(*job)));
  return statuses;
}

}  // namespace attn::server
