// server/backends/launch_plan.h
//
// LaunchPlan: a span of jobs as one kernel launch. A lone job runs as it
// is; several with one batch key (core/batch_key.h) run stacked along
// batch, each stacked tensor made of one part per job at its byte offset.
// The plan says what the kernel computes and which bytes of each tensor
// each job's source fills or destination takes; how the bytes move is each
// executor's routing (the CUDA executor: staging, the pinned heap's DMA, a
// region's DMA, device copies or in-place use; the CPU executor: host
// copies or in-place use). So batching, regions and the pinned heap are
// properties of one plan, not separate pipelines.
#ifndef ATTN_SERVER_BACKENDS_LAUNCH_PLAN_H_
#define ATTN_SERVER_BACKENDS_LAUNCH_PLAN_H_

#include <array>
#include <cstdint>
#include <string>
#include <vector>

#include "absl/functional/function_ref.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/types/span.h"
#include "core/job.h"

namespace attn::server {

// The three inputs, in the order of a plan's inputs().
enum class Input : int { kQ = 0, kK = 1, kV = 2 };

// One job's bytes of a stacked input.
struct InputPart {
  Job* job;
  const TensorSource* source;
  int64_t offset;  // in the stacked tensor; source->size() bytes
};

// One job's bytes of a stacked output.
struct OutputPart {
  Job* job;
  TensorDestination* destination;
  int64_t offset;  // in the stacked tensor
  int64_t bytes;
};

// What an executor's buffers hold: the bytes of each stacked tensor (Q and
// O, or K and V) and of the stacked LSE.
struct LaunchCapacity {
  int64_t tensor_bytes = INT64_MAX;
  int64_t lse_bytes = INT64_MAX;
};

class LaunchPlan {
 public:
  // A lone job's plan. Admission has proved it fits any executor's buffers
  // (they are sized from the same limits), so it is not checked again.
  static LaunchPlan Lone(Job& job);
  // Several jobs stacked along batch: INTERNAL unless they are stackable
  // with one batch key (the scheduler gathers only such), RESOURCE_EXHAUSTED
  // beyond `capacity`, or the kernel's own refusal of the stacked problem
  // (attn::ValidateProblem, e.g. batch at most 65535).
  static absl::StatusOr<LaunchPlan> Stacked(absl::Span<Job* const> jobs,
                                            const LaunchCapacity& capacity);

  // What the kernel computes: the first job's spec, with the stacked batch.
  const RequestSpec& spec() const { return spec_; }
  absl::Span<Job* const> jobs() const { return jobs_; }
  bool stacked() const { return jobs_.size() > 1; }

  const std::vector<InputPart>& inputs(Input input) const {
    return inputs_[static_cast<int>(input)];
  }
  const std::vector<OutputPart>& out() const { return out_; }
  const std::vector<OutputPart>& lse() const { return lse_; }  // empty unless return_lse

  // The source of `input` when the kernel may read it where it is: the
  // lone job's; null when stacked.
  const TensorSource* LoneSource(Input input) const {
    return stacked() ? nullptr : inputs(input).front().source;
  }
  // Likewise the destination of O, and of the LSE (null without one).
  TensorDestination* LoneOut() const { return stacked() ? nullptr : out_.front().destination; }
  TensorDestination* LoneLse() const {
    return stacked() || lse_.empty() ? nullptr : lse_.front().destination;
  }

  // Bytes of the stacked Q (and O), K (and V), LSE and of each cu_seqlens.
  int64_t q_bytes() const { return spec_.QBytes(); }
  int64_t kv_bytes() const { return spec_.KVBytes(); }
  int64_t lse_bytes() const { return spec_.LseBytes(); }
  int64_t cu_bytes() const {
    return static_cast<int64_t>(spec_.cu_seqlens_q.size() * sizeof(int32_t));
  }

  // Gives every job the launch's times and `device`; batch_size is the
  // number of jobs when stacked (0 alone).
  void SetTimes(int64_t h2d_ns, int64_t kernel_ns, int64_t d2h_ns,
                absl::string_view device) const;

 private:
  explicit LaunchPlan(absl::Span<Job* const> jobs);

  std::vector<Job*> jobs_;
  RequestSpec spec_;
  std::array<std::vector<InputPart>, 3> inputs_;
  std::vector<OutputPart> out_, lse_;
};

// Runs `jobs` with `run`: as one stacked plan when there are several and
// they fit together, else each as a lone plan (a batch that cannot stack is
// logged at warning, naming `executor` and why). One status per job, in
// order; the jobs of one stacked launch share its status.
std::vector<absl::Status> RunPlanned(absl::Span<Job* const> jobs, const LaunchCapacity& capacity,
                                     absl::string_view executor,
                                     absl::FunctionRef<absl::Status(const LaunchPlan&)> run);

}  // namespace attn::server

#endif  // ATTN_SERVER_BACKENDS_LAUNCH_PLAN_H_
