#include "kernel_timer.h"

#include <cuda_runtime_api.h>

#include <algorithm>
#include <cmath>

#include "absl/strings/str_cat.h"
#include "attn/attention.h"
#include "attn/gpu_reference.h"

namespace attn::bench {
namespace {

absl::Status Check(cudaError_t err, const char* what) {
  if (err == cudaSuccess) return absl::OkStatus();
  return absl::InternalError(absl::StrCat(what, ": ", cudaGetErrorString(err)));
}

#define ATTN_RETURN_IF_ERROR(expr)        \
  do {                                    \
    const absl::Status attn_st_ = (expr); \
    if (!attn_st_.ok()) return attn_st_;  \
  } while (0)

}  // namespace

absl::StatusOr<DeviceProblem> DeviceProblem::Create(const AttentionProblem& shape, DType dtype,
                                                    const TimingOptions& options,
                                                    uint64_t seed) {
  if (shape.varlen || shape.return_lse) {
    return absl::InvalidArgumentError("the kernel timer takes dense problems without LSE");
  }
  DeviceProblem problem(shape, dtype);
  const int64_t q_bytes = shape.QBytes(dtype);
  const int64_t kv_bytes = shape.KVBytes(dtype);
  const int64_t set_bytes = 2 * q_bytes + 2 * kv_bytes;
  const int sets = static_cast<int>(
      std::max<int64_t>(1, (options.min_rotation_bytes + set_bytes - 1) / set_bytes));
  for (int i = 0; i < sets; ++i) {
    Set set;
    for (void** p : {&set.q, &set.out}) {
      ATTN_RETURN_IF_ERROR(Check(cudaMalloc(p, q_bytes), "cudaMalloc"));
    }
    for (void** p : {&set.k, &set.v}) {
      ATTN_RETURN_IF_ERROR(Check(cudaMalloc(p, kv_bytes), "cudaMalloc"));
    }
    problem.sets_.push_back(set);
    ATTN_RETURN_IF_ERROR(FillRandomNormal(set.q, dtype, shape.QElements(), seed + 3 * i, nullptr));
    ATTN_RETURN_IF_ERROR(
        FillRandomNormal(set.k, dtype, shape.KVElements(), seed + 3 * i + 1, nullptr));
    ATTN_RETURN_IF_ERROR(
        FillRandomNormal(set.v, dtype, shape.KVElements(), seed + 3 * i + 2, nullptr));
  }
  ATTN_RETURN_IF_ERROR(Check(cudaDeviceSynchronize(), "filling inputs"));
  return problem;
}

DeviceProblem::DeviceProblem(DeviceProblem&& other) noexcept
    : problem_(other.problem_), dtype_(other.dtype_), sets_(std::move(other.sets_)) {
  other.sets_.clear();
}

DeviceProblem::~DeviceProblem() {
  for (const Set& set : sets_) {
    for (void* p : {set.q, set.k, set.v, set.out}) cudaFree(p);
  }
}

AttentionArgs DeviceProblem::Args(int set) const {
  const Set& s = sets_[set % sets_.size()];
  return AttentionArgs::Contiguous(problem_, dtype_, s.q, s.k, s.v, s.out);
}

absl::StatusOr<KernelTiming> DeviceProblem::Time(const std::string& kernel,
                                                 const TimingOptions& options) const {
  absl::StatusOr<KernelHandle> handle = ResolveKernel(kernel);
  if (!handle.ok()) return handle.status();
  for (int i = 0; i < options.warmup; ++i) {
    ATTN_RETURN_IF_ERROR(handle->Run(Args(i), nullptr));
  }
  ATTN_RETURN_IF_ERROR(Check(cudaDeviceSynchronize(), "warm-up"));
  std::vector<cudaEvent_t> events(2 * options.iterations);
  for (cudaEvent_t& e : events) ATTN_RETURN_IF_ERROR(Check(cudaEventCreate(&e), "cudaEventCreate"));
  absl::Status status;
  for (int i = 0; i < options.iterations && status.ok(); ++i) {
    status = Check(cudaEventRecord(events[2 * i]), "cudaEventRecord");
    if (status.ok()) status = handle->Run(Args(i), nullptr);
    if (status.ok()) status = Check(cudaEventRecord(events[2 * i + 1]), "cudaEventRecord");
  }
  if (status.ok()) status = Check(cudaDeviceSynchronize(), "timed runs");
  std::vector<double> ms;
  for (int i = 0; i < options.iterations && status.ok(); ++i) {
    float elapsed = 0;
    status = Check(cudaEventElapsedTime(&elapsed, events[2 * i], events[2 * i + 1]),
                   "cudaEventElapsedTime");
    ms.push_back(elapsed);
  }
  for (cudaEvent_t e : events) cudaEventDestroy(e);
  if (!status.ok()) return status;
  std::sort(ms.begin(), ms.end());
  KernelTiming t;
  t.median_ms = ms[ms.size() / 2];
  t.min_ms = ms.front();
  t.max_ms = ms.back();
  t.tflops = problem_.Flops() / (t.median_ms * 1e-3) / 1e12;
  return t;
}

absl::StatusOr<double> DeviceProblem::RelativeError(const std::string& kernel) const {
  const AttentionArgs args = Args(0);
  const int64_t n = problem_.QElements();
  float* ref = nullptr;
  ATTN_RETURN_IF_ERROR(Check(cudaMalloc(reinterpret_cast<void**>(&ref), n * sizeof(float)), "cudaMalloc"));
  std::vector<float> ref_host(n);
  std::vector<uint16_t> out_host(n);
  absl::Status status = AttentionGpuReference(args, ref, nullptr);
  if (status.ok()) status = Check(cudaMemset(args.out, 0xff, n * 2), "poisoning the output");
  if (status.ok()) status = Forward(args, kernel, nullptr);
  if (status.ok()) status = Check(cudaDeviceSynchronize(), "reference check");
  if (status.ok()) {
    status = Check(cudaMemcpy(ref_host.data(), ref, n * sizeof(float), cudaMemcpyDeviceToHost),
                   "copying the reference");
  }
  if (status.ok()) {
    status = Check(cudaMemcpy(out_host.data(), args.out, n * 2, cudaMemcpyDeviceToHost),
                   "copying the output");
  }
  cudaFree(ref);
  if (!status.ok()) return status;
  double diff = 0, norm = 0;
  for (int64_t i = 0; i < n; ++i) {
    const double d = BitsToFloat(out_host[i], dtype_) - static_cast<double>(ref_host[i]);
    diff += d * d;
    norm += static_cast<double>(ref_host[i]) * ref_host[i];
  }
  const double err = std::sqrt(diff / norm);
  return std::isfinite(err) ? err : INFINITY;
}

}  // namespace attn::bench
