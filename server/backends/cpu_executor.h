// server/backends/cpu_executor.h
//
// CpuExecutor: the CPU backend. Runs the request's CPU kernel ("cpu_flash"
// by default, or "cpu_reference") on host memory, on a thread pool of its
// own made at start-up (no thread is created per request). A lone job's tensors
// are read where they are (gathered only when they arrived in several pieces)
// and its outputs written straight to their destinations; a stacked launch
// (backends/launch_plan.h) copies each job's inputs into one array per
// tensor and each job's slice of the outputs back out. A stacked launch
// cannot be stopped early by one call's cancellation.
#ifndef ATTN_SERVER_CPU_EXECUTOR_H_
#define ATTN_SERVER_CPU_EXECUTOR_H_

#include <cstdint>
#include <string>
#include <vector>

#include "attn/cpu_thread_pool.h"
#include "backends/launch_plan.h"
#include "core/executor.h"

namespace attn::server {

class CpuExecutor : public Executor {
 public:
  // `threads` in its pool; 0 = the cores this process may use.
  explicit CpuExecutor(int threads);

  std::vector<absl::Status> Run(absl::Span<Job* const> jobs) override;
  // No buffers of its own: the front end's token limit bounds each request.
  int64_t BatchCapacityBytes() const override { return INT64_MAX; }
  std::string Name() const override { return name_; }

 private:
  absl::Status RunPlan(const LaunchPlan& plan);

  CpuThreadPool pool_;
  std::string name_;
};

}  // namespace attn::server

#endif  // ATTN_SERVER_CPU_EXECUTOR_H_
