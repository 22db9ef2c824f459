#include "cpu_executor.h"

#include <algorithm>
#include <thread>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "attn/attention.h"
#include "attn/cpu_reference.h"

namespace attn::server {

CpuExecutor::CpuExecutor(int threads)
    : threads_(threads > 0 ? threads
                           : std::max(1, static_cast<int>(std::thread::hardware_concurrency()))),
      name_(absl::StrCat("cpu (", threads_, threads_ == 1 ? " thread)" : " threads)")) {}

absl::Status CpuExecutor::Run(Job& job) {
  const RequestSpec& spec = job.spec;
  if (spec.kernel.backend != Backend::kCpu) {
    return absl::InternalError(
        absl::StrCat("CpuExecutor given kernel '", spec.kernel.name, "' of another backend"));
  }
  job.out->resize(static_cast<size_t>(spec.TensorBytes()));
  AttentionArgs args;
  args.q = {job.q.data(), spec.dtype, spec.shape};
  args.k = {job.k.data(), spec.dtype, spec.shape};
  args.v = {job.v.data(), spec.dtype, spec.shape};
  args.out = {job.out->data(), spec.dtype, spec.shape};
  args.softmax_scale = spec.softmax_scale;
  // The front end checked the request; this guards the kernel's own rules.
  if (absl::Status valid = ValidateArgs(args, spec.kernel); !valid.ok()) return valid;

  const absl::Time start = absl::Now();
  AttentionCpu(args, threads_);
  job.times.kernel_ns = ToNanos(absl::Now() - start);
  job.device = name_;
  return absl::OkStatus();
}

}  // namespace attn::server
