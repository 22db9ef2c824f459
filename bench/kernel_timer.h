// Timing of registered attention kernels on the GPU, shared by attn_bench
// and attn_tune: device inputs in several rotating sets (together larger
// than L2, so no run starts with its inputs cached), CUDA events around each
// launch, median over many launches after a warm-up.
#ifndef ATTN_BENCH_KERNEL_TIMER_H_
#define ATTN_BENCH_KERNEL_TIMER_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "attn/problem.h"

namespace attn::bench {

struct TimingOptions {
  int warmup = 10;
  int iterations = 50;
  int64_t min_rotation_bytes = int64_t{256} << 20;  // several times an H200's 60 MB L2
};

struct KernelTiming {
  double median_ms = 0;
  double min_ms = 0;
  double max_ms = 0;
  double tflops = 0;  // AttentionProblem::Flops() / median
};

// Device inputs for one (non-varlen) problem and dtype, filled with N(0, 1)
// samples, contiguous.
class DeviceProblem {
 public:
  static absl::StatusOr<DeviceProblem> Create(const AttentionProblem& problem, DType dtype,
                                              const TimingOptions& options, uint64_t seed);
  DeviceProblem(DeviceProblem&&) noexcept;
  DeviceProblem& operator=(DeviceProblem&&) = delete;
  ~DeviceProblem();

  const AttentionProblem& problem() const { return problem_; }
  DType dtype() const { return dtype_; }
  int sets() const { return static_cast<int>(sets_.size()); }
  AttentionArgs Args(int set) const;

  // Times `kernel` (median of options.iterations launches, rotating sets).
  absl::StatusOr<KernelTiming> Time(const std::string& kernel, const TimingOptions& options) const;

  // ‖out − ref‖/‖ref‖ of one run of `kernel` against the float32 GPU
  // reference, with the output poisoned first; NaN outputs count as failure.
  absl::StatusOr<double> RelativeError(const std::string& kernel) const;

 private:
  struct Set {
    void* q = nullptr;
    void* k = nullptr;
    void* v = nullptr;
    void* out = nullptr;
  };
  DeviceProblem(const AttentionProblem& problem, DType dtype) : problem_(problem), dtype_(dtype) {}

  AttentionProblem problem_;
  DType dtype_;
  std::vector<Set> sets_;
};

}  // namespace attn::bench

#endif  // ATTN_BENCH_KERNEL_TIMER_H_
