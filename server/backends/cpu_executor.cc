#include "backends/cpu_executor.h"

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <string>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "attn/attention.h"
#include "attn/cpu_kernels.h"
#include "backends/output_poison.h"

namespace attn::server {
namespace {

// The CPU kernel reads 16-bit elements from whole arrays.
constexpr size_t kAlignment = alignof(uint16_t);

// INTERNAL unless every job of `plan` is for this backend, has nothing on
// a device and a place for each output (the catalog, region registration
// and the front end keep each from happening).
absl::Status CheckPlan(const LaunchPlan& plan) {
  const RequestSpec& spec = plan.spec();
  if (spec.kernel == nullptr || spec.kernel_info().backend != Backend::kCpu) {
    return absl::InternalError(absl::StrCat(
        "CpuExecutor given kernel '", spec.kernel == nullptr ? "(none)" : spec.kernel_info().name,
        "' of another backend"));
  }
  for (const Job* job : plan.jobs()) {
    for (const TensorSource* input : {&job->q, &job->k, &job->v}) {
      if (input->on_device())
        return absl::InternalError("CpuExecutor given a tensor in a CUDA region");
    }
    if (job->out.on_device() || (spec.problem.return_lse && job->lse.on_device())) {
      return absl::InternalError("CpuExecutor given an output in a CUDA region");
    }
    if (!job->out.set() || (spec.problem.return_lse && !job->lse.set())) {
      return absl::InternalError("CpuExecutor given a job with nowhere to write an output");
    }
  }
  return absl::OkStatus();
}

// Where the kernel writes one output of `bytes`, poisoned first so rows it
// fails to write cannot pass for results: a lone job's destination itself,
// else `stacked` (split afterwards by Scatter).
char* OutputArea(TensorDestination* lone, int64_t bytes, std::string* stacked) {
  char* area = nullptr;
  if (lone == nullptr) {
    stacked->resize(static_cast<size_t>(bytes));
    area = stacked->data();
  } else if (lone->in_region()) {
    area = lone->data;
  } else {
    lone->host->resize(static_cast<size_t>(bytes));
    area = lone->host->data();
  }
  std::memset(area, kOutputPoisonByte, static_cast<size_t>(bytes));
  return area;
}

// Each part's slice of the stacked output into its destination.
void Scatter(const std::vector<OutputPart>& parts, const std::string& stacked) {
  for (const OutputPart& part : parts) {
    const char* from = stacked.data() + part.offset;
    if (part.destination->in_region()) {
      std::memcpy(part.destination->data, from, static_cast<size_t>(part.bytes));
    } else {
      part.destination->host->assign(from, static_cast<size_t>(part.bytes));
    }
  }
}

}  // namespace

CpuExecutor::CpuExecutor(int threads)
    : pool_(threads),
      name_(absl::StrCat("cpu (", pool_.size(), pool_.size() == 1 ? " thread)" : " threads)")) {}

std::vector<absl::Status> CpuExecutor::Run(absl::Span<Job* const> jobs) {
  return RunPlanned(jobs, LaunchCapacity{}, name_,
                    [this](const LaunchPlan& plan) { return RunPlan(plan); });
}

absl::Status CpuExecutor::RunPlan(const LaunchPlan& plan) {
  if (absl::Status checked = CheckPlan(plan); !checked.ok()) return checked;
  const RequestSpec& spec = plan.spec();

  // Inputs: a lone job's where they are when they are one aligned piece
  // (else gathered: the CUDA executor copies pieces to staging instead);
  // a stack's copied to each job's offset.
  const absl::Time stack_start = absl::Now();
  std::string scratch[3];
  const char* inputs[3] = {};
  for (Input input : {Input::kQ, Input::kK, Input::kV}) {
    const int i = static_cast<int>(input);
    if (const TensorSource* lone = plan.LoneSource(input); lone != nullptr) {
      inputs[i] = lone->Contiguous(&scratch[i], kAlignment).data();
      continue;
    }
    scratch[i].resize(static_cast<size_t>(input == Input::kQ ? plan.q_bytes() : plan.kv_bytes()));
    for (const InputPart& part : plan.inputs(input)) {
      part.source->CopyTo(scratch[i].data() + part.offset);
    }
    inputs[i] = scratch[i].data();
  }
  std::string stacked_out, stacked_lse;
  char* out = OutputArea(plan.LoneOut(), plan.q_bytes(), &stacked_out);
  float* lse = nullptr;
  if (spec.problem.return_lse) {
    // float32 in host (little-endian) order, as the wire wants it.
    lse = reinterpret_cast<float*>(OutputArea(plan.LoneLse(), plan.lse_bytes(), &stacked_lse));
  }
  const int64_t stack_ns = plan.stacked() ? ToNanos(absl::Now() - stack_start) : 0;

  // The request's CPU kernel on this executor's threads. A lone call's
  // cancellation flag (client cancel, deadline, the server's drain timeout:
  // gRPC cancels the call for each) is read between tasks.
  const absl::Time start = absl::Now();
  const std::atomic<bool>* cancelled = plan.stacked() ? nullptr : plan.jobs().front()->cancelled;
  const bool finished =
      RunCpuKernel(spec.kernel_info().name, spec.Args(inputs[0], inputs[1], inputs[2], out, lse),
                   pool_, cancelled);
  const int64_t kernel_ns = ToNanos(absl::Now() - start);
  if (!finished) {
    return absl::CancelledError(absl::StrCat("stopped between tiles after ",
                                             absl::FormatDuration(absl::Now() - start),
                                             ": the call was cancelled"));
  }

  const absl::Time split_start = absl::Now();
  if (plan.stacked()) {
    Scatter(plan.out(), stacked_out);
    Scatter(plan.lse(), stacked_lse);
  }
  const int64_t split_ns = plan.stacked() ? ToNanos(absl::Now() - split_start) : 0;
  plan.SetTimes(stack_ns, kernel_ns, split_ns, name_);
  return absl::OkStatus();
}

}  // namespace attn::server
