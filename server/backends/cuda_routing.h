// server/backends/cuda_routing.h
//
// The CUDA executor's routing: how each part of a launch plan
// (launch_plan.h) reaches the kernel on one slot (cuda_slot.h), and how
// each output goes back. Inputs:
//   message      DMA straight from the pieces gRPC received into the pinned
//                heap's arena, when it holds at least half the tensor's
//                bytes (its other pieces staged at their offsets); else
//                through the ring (--staging_chunk_bytes); else staged
//                whole by the copy threads, then one DMA
//   system region  one DMA from the region (page-locked at registration)
//   device region  read in place by a lone launch; copied on the device
//                into the stacked tensor otherwise
// Outputs: a lone launch writes a device region in place; otherwise the
// kernel writes the slot's buffers and each part goes to its destination:
// a device region by a device copy, a system region by DMA, the response by
// DMA into a range of pinned memory lent to it (one per job), else into
// staging, copied into the response's string after the wait.
//
// Routing decides and lists the copies; the executor runs them.
// CUDA builds only.
#ifndef ATTN_SERVER_CUDA_ROUTING_H_
#define ATTN_SERVER_CUDA_ROUTING_H_

#include <cuda_runtime.h>

#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "backends/chunked_upload.h"
#include "backends/cuda_slot.h"
#include "backends/launch_plan.h"
#include "backends/parallel_copier.h"
#include "backends/pinned_output_pool.h"

namespace attn::server {

// One copy on the stream.
struct DeviceCopy {
  void* to;
  const void* from;
  int64_t bytes;
  cudaMemcpyKind kind;
};

// One copy on the host after the stream is done: staging into a string.
struct HostCopy {
  std::string* to;
  const char* from;
  int64_t bytes;
};

// Every copy of one launch, in the order they run.
struct CudaRoute {
  // What the kernel reads and writes (device memory).
  const void* q = nullptr;
  const void* k = nullptr;
  const void* v = nullptr;
  void* out = nullptr;
  float* lse = nullptr;  // null unless the problem returns it
  // 1. On the host, before anything is enqueued: into pinned staging (the
  //    copy threads).
  std::vector<ParallelCopier::Task> staging;
  // 2. On the stream, before the kernel: through the ring; from the pinned
  //    heap's arena (the slot's heap_copies(), one batched call) when
  //    `from_heap`; then these.
  std::vector<ChunkedUpload::Tensor> ring;
  bool from_heap = false;
  std::vector<DeviceCopy> in;
  // 3. On the stream, after the kernel.
  std::vector<DeviceCopy> back;
  // 4. On the host, once the stream is done; then each job takes its lent
  //    range.
  std::vector<HostCopy> unstage;
  std::vector<std::pair<Job*, std::unique_ptr<PinnedOutputPool::Lent>>> lent;
};

// The route of `plan` on `slot` (which it lists heap DMAs in and lends
// output ranges from). Varlen offsets are not routed: the executor stages
// them (plan.cu_bytes()).
CudaRoute RoutePlan(const LaunchPlan& plan, CudaSlot& slot);

}  // namespace attn::server

#endif  // ATTN_SERVER_CUDA_ROUTING_H_
