// server/cuda_executor.h
//
// The CUDA backend's executors. Implemented in cuda_executor.cc in builds
// with CUDA (ATTN_HAVE_CUDA) and in cuda_executor_none.cc otherwise, so a
// CPU-only build contains no CUDA code at all.
//
// One executor per (device, stream): each owns a non-blocking CUDA stream,
// timing events, and device buffers for Q, K, V, O plus pinned host staging
// buffers, every one sized for the largest allowed tensor and allocated once
// here, never per request. Run() stages the inputs into pinned memory,
// copies them to the device, runs attn::Forward on the stream, copies O back
// and waits for the stream (blocking the worker thread, not a gRPC thread).
// Kernel time comes from CUDA events around the launch. A failed CUDA call
// becomes INTERNAL naming the call, the device and the source line.
#ifndef ATTN_SERVER_CUDA_EXECUTOR_H_
#define ATTN_SERVER_CUDA_EXECUTOR_H_

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "attn/attention.h"
#include "attn/device.h"
#include "executor.h"

namespace attn::server {

struct CudaExecutorOptions {
  std::vector<DeviceInfo> devices;  // the devices to serve on
  int streams_per_device = 2;
  int64_t max_tensor_bytes = 0;  // each of the four buffers per stream
  // Launched once per device at start-up (module load, first-launch costs),
  // so the first request is not slower than the rest and a broken device
  // fails start-up rather than requests.
  KernelInfo warmup_kernel;
};

// Creates and warms up the executors; FAILED_PRECONDITION in a build
// without CUDA, RESOURCE_EXHAUSTED when the buffers do not fit, INTERNAL for
// other CUDA failures.
absl::StatusOr<std::vector<std::unique_ptr<Executor>>> CreateCudaExecutors(
    const CudaExecutorOptions& options);

// "CUDA runtime 12.4, driver 12.6", or "no CUDA" in a build without it.
std::string CudaVersionString();

}  // namespace attn::server

#endif  // ATTN_SERVER_CUDA_EXECUTOR_H_
