// server/backends/cuda_executor.h
//
// The CUDA backend's executors. Implemented in cuda_executor.cc in builds
// with CUDA (ATTN_HAVE_CUDA) and in cuda_executor_none.cc otherwise, so a
// CPU-only build contains no CUDA code at all.
//
// One executor per (device, stream), each over a CudaSlot (cuda_slot.h):
// the stream, its events and every buffer a launch needs, allocated once
// here, never per request. Run() plans its jobs as one launch (or each
// alone, launch_plan.h), routes every part (cuda_routing.h: pinned heap,
// staging, regions, device copies), enqueues the copies in, poisons O and
// the LSE (NaN), launches the request's kernel bound to the executor's
// device (KernelCatalog::OnDevice; admission checked the problem, so the
// launch repeats no check) on the stream,
// enqueues the copies back and waits for the stream (blocking the worker
// thread, not a gRPC thread). Kernel time comes from CUDA events around the
// launch. A failed CUDA call becomes INTERNAL naming the call, the device
// and the source line; a sticky one retires the executor.
#ifndef ATTN_SERVER_CUDA_EXECUTOR_H_
#define ATTN_SERVER_CUDA_EXECUTOR_H_

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "attn/attention.h"
#include "attn/device.h"
#include "backends/kernel_catalog.h"
#include "core/executor.h"

namespace attn::server {

struct CudaExecutorOptions {
  std::vector<DeviceInfo> devices;  // the devices to serve on
  int streams_per_device = 2;
  int64_t max_tensor_bytes = 0;  // each of Q, K, V, O per stream
  // Query rows x heads (LSE elements) and sequences (varlen) of one request:
  // sizes the LSE buffer (float32) and the cu_seqlens buffers (max_rows + 1
  // int32 each).
  int64_t max_rows = 0;
  // The server's kernels, resolved for each of `devices`
  // (KernelCatalog::ForCudaDevices): an executor launches the handle of a
  // job's kernel bound to its own device. Its default kernel is launched
  // once per stream at start-up (module load, first-launch costs), so the
  // first request is not slower than the rest and a broken device fails
  // start-up rather than requests.
  std::shared_ptr<const KernelCatalog> catalog;
  // Helper threads that copy request tensors into pinned staging, shared by
  // every executor (parallel_copier.h); 0 copies on the worker alone.
  int copy_threads = 2;
  // Large requests' staging copies with streaming stores (streaming_copy.h)
  // instead of memcpy.
  bool streaming_staging = true;
  // Wait for a launch by polling its last event rather than sleeping in a
  // blocking-sync wait (ServerOptions::spin_wait).
  bool spin_wait = true;
  // > 0: inline inputs go to the device a chunk of at most this many bytes
  // at a time through a small pinned ring (chunked_upload.h); 0: staged
  // whole, then copied.
  int64_t staging_chunk_bytes = 0;
  // KV-cache session steps (0: this server has no sessions): the most
  // sessions one step call names and entries of its block table
  // (SessionLimits), which size each stream's step tables.
  int max_steps_per_call = 0;
  int64_t max_step_block_entries = 0;
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
