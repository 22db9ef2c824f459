// server/backends/worker_fault_spec.h
//
// TEST ONLY. What --test_inject_worker_faults asks for: which workers fail,
// and after how many jobs, so tests can make a worker fail the way a GPU
// with a sticky error does (FaultInjectingExecutor), on any backend. Off
// (empty) unless the flag is given; never for production use.
//
//   "1:0"      worker 1 fails the first job it takes
//   "0:2,1:0"  worker 0 runs 2 jobs normally and fails its third; worker 1
//              fails its first
//
// Workers are numbered in the scheduler's order, as the `worker` label of
// attn_worker_healthy: CPU workers 0 .. --cpu_workers-1; CUDA workers device
// by device, stream by stream.
#ifndef ATTN_SERVER_WORKER_FAULT_SPEC_H_
#define ATTN_SERVER_WORKER_FAULT_SPEC_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace attn::server {

// The flag, as every message about a fault spec names it.
inline constexpr char kWorkerFaultFlag[] = "--test_inject_worker_faults";

struct WorkerFault {
  int worker = 0;         // index of the worker that fails
  int64_t good_jobs = 0;  // jobs it runs normally before the one it fails
};

// Parses comma-separated WORKER:GOOD_JOBS pairs ("" = no faults). Errors:
// INVALID_ARGUMENT naming the flag: a pair that is not two non-negative
// integers, or a worker named twice.
absl::StatusOr<std::vector<WorkerFault>> ParseWorkerFaults(absl::string_view spec);

// The spec back in the flag's syntax, e.g. "0:2,1:0" (for the log).
std::string FormatWorkerFaults(const std::vector<WorkerFault>& faults);

}  // namespace attn::server

#endif  // ATTN_SERVER_WORKER_FAULT_SPEC_H_
