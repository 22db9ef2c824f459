#include "backends/cpu_executor.h"

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <string>
#include <thread>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "attn/attention.h"
#include "attn/cpu_reference.h"
#include "backends/output_poison.h"
#include "scheduling/batch_key.h"

namespace attn::server {

CpuExecutor::CpuExecutor(int threads)
    : threads_(threads > 0 ? threads
                           : std::max(1, static_cast<int>(std::thread::hardware_concurrency()))),
      name_(absl::StrCat("cpu (", threads_, threads_ == 1 ? " thread)" : " threads)")) {}

absl::Status CpuExecutor::CheckJob(const Job& job) const {
  const RequestSpec& spec = job.spec;
  if (spec.kernel == nullptr || spec.kernel_info().backend != Backend::kCpu) {
    return absl::InternalError(absl::StrCat(
        "CpuExecutor given kernel '", spec.kernel == nullptr ? "(none)" : spec.kernel_info().name,
        "' of another backend"));
  }
  for (const TensorBytes* input : {&job.q, &job.k, &job.v}) {
    if (input->on_device()) {
      return absl::InternalError("CpuExecutor given a tensor in a CUDA region");
    }
  }
  if (job.out_place.path == TensorPath::kCudaRegion ||
      job.lse_place.path == TensorPath::kCudaRegion) {
    return absl::InternalError("CpuExecutor given an output in a CUDA region");
  }
  return absl::OkStatus();
}

absl::Status CpuExecutor::Run(Job& job) {
  const RequestSpec& spec = job.spec;
  if (absl::Status checked = CheckJob(job); !checked.ok()) return checked;
  // O goes to the request's region when it named one (poisoned first, so
  // rows the kernel failed to write cannot pass for results), else into the
  // response.
  char* out = nullptr;
  if (job.out_place.in_region()) {
    out = job.out_place.data;
    std::memset(out, kOutputPoisonByte, static_cast<size_t>(spec.QBytes()));
  } else {
    job.out->resize(static_cast<size_t>(spec.QBytes()));
    out = job.out->data();
  }
  float* lse = nullptr;
  if (spec.problem.return_lse) {
    // float32 in host (little-endian) order, as the wire wants it.
    if (job.lse_place.in_region()) {
      std::memset(job.lse_place.data, kOutputPoisonByte, static_cast<size_t>(spec.LseBytes()));
      lse = reinterpret_cast<float*>(job.lse_place.data);
    } else {
      if (job.lse == nullptr) return absl::InternalError("return_lse is set but the job has no lse");
      job.lse->resize(static_cast<size_t>(spec.LseBytes()));
      lse = reinterpret_cast<float*>(job.lse->data());
    }
  }
  // The CPU kernel reads whole, aligned arrays: tensors that arrived in
  // several slices, or at an odd offset, are gathered first (the CUDA
  // executor copies them to staging piece by piece instead).
  constexpr size_t kAlignment = alignof(uint16_t);  // the kernel's 16-bit elements
  std::string q_scratch, k_scratch, v_scratch;
  const AttentionArgs args = spec.Args(job.q.Contiguous(&q_scratch, kAlignment).data(),
                                       job.k.Contiguous(&k_scratch, kAlignment).data(),
                                       job.v.Contiguous(&v_scratch, kAlignment).data(),
                                       out, lse);
  // The front end checked the problem; this checks the arguments (host
  // pointers, the host cu_seqlens) by the kernel's own rules.
  if (absl::Status valid = ValidateArgs(args, spec.kernel_info()); !valid.ok()) return valid;

  const absl::Time start = absl::Now();
  // The CPU kernel, with this executor's thread count. It reads the call's
  // cancellation flag (client cancel, deadline, the server's drain timeout:
  // gRPC cancels the call for each) between tasks and stops early.
  const bool finished = AttentionCpu(args, threads_, job.cancelled);
  job.times.kernel_ns = ToNanos(absl::Now() - start);
  if (!finished) {
    return absl::CancelledError(absl::StrCat("stopped between tiles after ",
                                             absl::FormatDuration(absl::Now() - start),
                                             ": the call was cancelled"));
  }
  job.device = name_;
  return absl::OkStatus();
}

}  // namespace attn::server

namespace attn::server {

std::vector<absl::Status> CpuExecutor::RunBatch(absl::Span<Job* const> jobs) {
  const auto all = [&](absl::Status status) {
    return std::vector<absl::Status>(jobs.size(), status);
  };
  // Jobs that cannot share a launch run one by one (Run reports what is
  // wrong with each).
  for (const Job* job : jobs) {
    if (!CheckJob(*job).ok() || !Stackable(*job) ||
        !SameBatchKey(jobs.front()->spec, job->spec)) {
      return Executor::RunBatch(jobs);
    }
  }
  const RequestSpec& key = jobs.front()->spec;
  const AttentionProblem problem = StackedProblem(jobs);
  const int64_t q_bytes = problem.QBytes(key.dtype);
  const int64_t kv_bytes = problem.KVBytes(key.dtype);
  const int64_t lse_bytes = problem.LseBytes();

  // Stack the inputs: each job's bytes at its batch offset (the layouts
  // are batch-major, batch_key.h). std::string storage is 8-byte aligned.
  const absl::Time stack_start = absl::Now();
  std::string q(static_cast<size_t>(q_bytes), '\0'), k(static_cast<size_t>(kv_bytes), '\0'),
      v(static_cast<size_t>(kv_bytes), '\0');
  // Outputs poisoned, so rows the kernel failed to write read as NaN.
  std::string out(static_cast<size_t>(q_bytes), static_cast<char>(kOutputPoisonByte));
  std::string lse(static_cast<size_t>(lse_bytes), static_cast<char>(kOutputPoisonByte));
  int64_t q_at = 0, kv_at = 0;
  for (const Job* job : jobs) {
    job->q.CopyTo(q.data() + q_at);
    job->k.CopyTo(k.data() + kv_at);
    job->v.CopyTo(v.data() + kv_at);
    q_at += job->spec.QBytes();
    kv_at += job->spec.KVBytes();
  }
  const int64_t stack_ns = ToNanos(absl::Now() - stack_start);

  const AttentionArgs args = AttentionArgs::Contiguous(
      problem, key.dtype, q.data(), k.data(), v.data(), out.data(),
      problem.return_lse ? reinterpret_cast<float*>(lse.data()) : nullptr);
  // A stack the kernel refuses (its limits apply to the stacked problem)
  // runs one by one, each request checked on its own.
  if (!ValidateArgs(args, key.kernel_info()).ok()) return Executor::RunBatch(jobs);
  const absl::Time start = absl::Now();
  AttentionCpu(args, threads_, /*cancelled=*/nullptr);
  const int64_t kernel_ns = ToNanos(absl::Now() - start);

  // Each job's output is its consecutive slice of the stacked one.
  const absl::Time split_start = absl::Now();
  q_at = 0;
  int64_t lse_at = 0;
  for (Job* job : jobs) {
    job->out->assign(out.data() + q_at, static_cast<size_t>(job->spec.QBytes()));
    if (problem.return_lse) {
      job->lse->assign(lse.data() + lse_at, static_cast<size_t>(job->spec.LseBytes()));
    }
    q_at += job->spec.QBytes();
    lse_at += job->spec.LseBytes();
  }
  const int64_t split_ns = ToNanos(absl::Now() - split_start);
  for (Job* job : jobs) {
    job->times.h2d_ns = stack_ns;
    job->times.kernel_ns = kernel_ns;
    job->times.d2h_ns = split_ns;
    job->times.batch_size = static_cast<int64_t>(jobs.size());
    job->device = name_;
  }
  return all(absl::OkStatus());
}

}  // namespace attn::server
