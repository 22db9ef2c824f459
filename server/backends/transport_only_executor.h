// server/backends/transport_only_executor.h
//
// The executor of --backend=transport_only, a measurement mode (never a
// default, never chosen by auto): it computes nothing. Each job's output is
// the right size and every element NaN (the executors' poison), so no caller
// can take it for a result, and responses name the backend. With it, a load
// generator measures what gRPC, the codec and the scheduler allow on their
// own: the transport ceiling of the throughput table (bench/RESULTS.md).
#ifndef ATTN_SERVER_TRANSPORT_ONLY_EXECUTOR_H_
#define ATTN_SERVER_TRANSPORT_ONLY_EXECUTOR_H_

#include <memory>
#include <string>
#include <vector>

#include "core/executor.h"

namespace attn::server {

// What ServerInfo.backend and every response's backend field say.
inline constexpr char kTransportOnlyBackendName[] =
    "transport_only (measurement mode: no attention computed, outputs are NaN)";

class TransportOnlyExecutor : public JobByJobExecutor {
 public:
  // `nan_bytes`: at least the largest output (or LSE) a request may have,
  // every byte 0xff, shared by the executors. With `fresh_outputs` each
  // response's output is a buffer of its own, filled with NaN by the worker
  // and lent to the front end (as the CUDA executor lends the pinned range
  // it copied O into), so gRPC sends it from memory as it would a real
  // output; without, `nan_bytes` itself is lent to every response, and
  // sending it reads bytes the CPU's caches keep.
  TransportOnlyExecutor(int index, std::shared_ptr<const std::string> nan_bytes,
                        bool fresh_outputs);
  std::string Name() const override { return name_; }

 private:
  absl::Status RunJob(Job& job) override;

  const std::string name_;
  const std::shared_ptr<const std::string> nan_bytes_;
  const bool fresh_outputs_;
};

}  // namespace attn::server

#endif  // ATTN_SERVER_TRANSPORT_ONLY_EXECUTOR_H_
