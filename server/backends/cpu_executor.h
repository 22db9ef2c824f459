// server/backends/cpu_executor.h
//
// CpuExecutor: the CPU backend. Runs the kernel library's CPU reference
// ("cpu_reference": fp32 accumulation, tiled online softmax) on host memory,
// with a fixed number of threads per request. A lone job's tensors are read
// where they are (gathered only when they arrived in several pieces) and
// its outputs written straight to their destinations; a stacked launch
// (backends/launch_plan.h) copies each job's inputs into one array per
// tensor and each job's slice of the outputs back out. A stacked launch
// cannot be stopped early by one call's cancellation.
#ifndef ATTN_SERVER_CPU_EXECUTOR_H_
#define ATTN_SERVER_CPU_EXECUTOR_H_

#include <cstdint>
#include <string>
#include <vector>

#include "backends/launch_plan.h"
#include "core/executor.h"

namespace attn::server {

class CpuExecutor : public Executor {
 public:
  // `threads` per request; 0 = the host's hardware concurrency.
  explicit CpuExecutor(int threads);

  std::vector<absl::Status> Run(absl::Span<Job* const> jobs) override;
  // No buffers of its own: the front end's token limit bounds each request.
  int64_t BatchCapacityBytes() const override { return INT64_MAX; }
  std::string Name() const override { return name_; }

 private:
  absl::Status RunPlan(const LaunchPlan& plan);

  int threads_;
  std::string name_;
};

}  // namespace attn::server

#endif  // ATTN_SERVER_CPU_EXECUTOR_H_
