// server/backends/cpu_executor.h
//
// CpuExecutor: the CPU backend. Runs the kernel library's CPU reference
// ("cpu_reference": fp32 accumulation, tiled online softmax) on host memory,
// with a fixed number of threads per request. No copies: it reads the
// request's tensors where they are and writes the response's bytes.
// RunBatch stacks its jobs (copying their inputs into one array each, and
// the stacked output back out) and runs the kernel once over all of them;
// such a launch cannot be stopped early by one call's cancellation.
#ifndef ATTN_SERVER_CPU_EXECUTOR_H_
#define ATTN_SERVER_CPU_EXECUTOR_H_

#include <cstdint>
#include <string>
#include <vector>

#include "backends/executor.h"

namespace attn::server {

class CpuExecutor : public Executor {
 public:
  // `threads` per request; 0 = the host's hardware concurrency.
  explicit CpuExecutor(int threads);

  absl::Status Run(Job& job) override;
  std::vector<absl::Status> RunBatch(absl::Span<Job* const> jobs) override;
  // No buffers of its own: the front end's token limit bounds each request.
  int64_t BatchCapacityBytes() const override { return INT64_MAX; }
  std::string Name() const override { return name_; }

 private:
  // INTERNAL unless `job` is for this backend and has nothing on a device.
  absl::Status CheckJob(const Job& job) const;

  int threads_;
  std::string name_;
};

}  // namespace attn::server

#endif  // ATTN_SERVER_CPU_EXECUTOR_H_
