// server/backends/cpu_executor.h
//
// CpuExecutor: the CPU backend. Runs the kernel library's CPU reference
// ("cpu_reference": fp32 accumulation, tiled online softmax) on host memory,
// with a fixed number of threads per request. No copies: it reads the
// request's tensors where they are and writes the response's bytes.
#ifndef ATTN_SERVER_CPU_EXECUTOR_H_
#define ATTN_SERVER_CPU_EXECUTOR_H_

#include <string>

#include "backends/executor.h"

namespace attn::server {

class CpuExecutor : public Executor {
 public:
  // `threads` per request; 0 = the host's hardware concurrency.
  explicit CpuExecutor(int threads);

  absl::Status Run(Job& job) override;
  std::string Name() const override { return name_; }

 private:
  int threads_;
  std::string name_;
};

}  // namespace attn::server

#endif  // ATTN_SERVER_CPU_EXECUTOR_H_
