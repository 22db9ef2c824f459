// server/backends/cuda_slot.h
//
// CudaSlot: one stream of one device with everything a launch needs,
// allocated once at start-up, never per request: the non-blocking stream
// and its timing events; device buffers for Q, K, V, O (each sized for the
// largest allowed tensor on its own: K and V may be larger than Q when
// kv_seq_len > seq_len), the float32 LSE and the two cu_seqlens, the
// kernels' workspace (split-KV partial results for decode); pinned
// staging for inputs and outputs; the pinned memory lent to responses
// (pinned_output_pool.h); the ring of --staging_chunk_bytes
// (chunked_upload.h), in memory of its own; and the pinned heap's arena
// when armed (heap_arena.h), with the batch of DMAs from it. What of it a
// launch uses is the routing's decision (cuda_routing.h); the executor
// (cuda_executor.cc) enqueues and waits.
//
// CUDA builds only. Used by one worker thread.
#ifndef ATTN_SERVER_CUDA_SLOT_H_
#define ATTN_SERVER_CUDA_SLOT_H_

#include <cuda_runtime.h>

#include <cstdint>
#include <memory>
#include <optional>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "attn/device.h"
#include "backends/chunked_upload.h"
#include "backends/cuda_memory.h"
#include "backends/h2d_batch.h"
#include "backends/heap_arena.h"
#include "backends/launch_plan.h"
#include "backends/parallel_copier.h"
#include "backends/pinned_output_pool.h"

namespace attn::server {

// Bytes of every buffer one slot holds, from the request bounds.
struct CudaBufferSizes {
  int64_t tensor = 0;  // each of Q, K, V, O
  int64_t lse = 0;     // float32 rows
  int64_t cu = 0;      // each of cu_seqlens_q and cu_seqlens_k (int32)
  // AttentionArgs::workspace: the catalog's MaxWorkspaceBytes for the device.
  int64_t workspace = 0;
  // A session step's int32 tables (0 without sessions): cu_seqlens_q,
  // cache_seqlens and the block table, in one buffer (StepTables).
  int64_t step_tables = 0;

  // `max_rows`: query rows x heads (LSE elements) and sequences (varlen)
  // of one request.
  static CudaBufferSizes For(int64_t max_tensor_bytes, int64_t max_rows,
                             int64_t workspace_bytes);
  // With room for the tables of a step of `max_steps` sessions whose block
  // table has at most `max_block_entries` entries.
  CudaBufferSizes WithStepTables(int max_steps, int64_t max_block_entries) const;
  int64_t Device() const { return 4 * tensor + lse + 2 * cu + workspace + step_tables; }
  int64_t PinnedIn() const { return 3 * tensor + 2 * cu; }  // q, k, v, cu_q, cu_k
  int64_t PinnedOut() const { return tensor + lse; }        // o, lse
  LaunchCapacity Capacity() const { return {tensor, lse}; }
};

// RESOURCE_EXHAUSTED unless `device` has room for `streams` slots.
absl::Status CheckDeviceMemory(const DeviceInfo& device, int streams,
                               const CudaBufferSizes& sizes);

class CudaSlot {
 public:
  // Pinned memory lent to responses, in outputs of the largest size: room
  // for the responses of the requests a stream finishes while earlier ones
  // are still being sent (24 at S=4096, B=1, H=16, d=128 with the default
  // limits). With 3 (12 such outputs), at concurrency 64 on the H200 host
  // about half the responses found the pool full and were copied once more
  // on the worker (bench/RESULTS.md, 2026-12-02 second run). 6 x 64 MiB is
  // 384 MiB pinned per stream.
  static constexpr int kLentOutputs = 6;

  // `staging_chunk_bytes` > 0: a ring of four slots of at most that many
  // bytes; `heap`: the pinned heap's arena, page-locked.
  static absl::StatusOr<std::unique_ptr<CudaSlot>> Create(
      const DeviceInfo& device, int stream_index, const CudaBufferSizes& sizes,
      std::shared_ptr<ParallelCopier> copier, int64_t staging_chunk_bytes,
      std::optional<HeapArena> heap);
  // Waits for the stream: nothing may still use the buffers.
  ~CudaSlot();

  int ordinal() const { return ordinal_; }
  // e.g. "NVIDIA H200 (cuda:0, stream 1)".
  const std::string& name() const { return name_; }
  const CudaBufferSizes& sizes() const { return sizes_; }
  cudaStream_t stream() const { return stream_.get(); }
  cudaEvent_t start() const { return start_.get(); }
  cudaEvent_t h2d_done() const { return h2d_done_.get(); }
  cudaEvent_t kernel_done() const { return kernel_done_.get(); }
  cudaEvent_t d2h_done() const { return d2h_done_.get(); }  // blocking sync

  char* device_input(Input input) const;
  char* device_out() const { return static_cast<char*>(d_out_.get()); }
  char* device_lse() const { return static_cast<char*>(d_lse_.get()); }
  int32_t* device_cu(int which) const;  // 0: cu_seqlens_q, 1: cu_seqlens_k
  // sizes().workspace bytes (null when 0), for every launch on the stream.
  void* device_workspace() const { return d_workspace_.get(); }
  // sizes().step_tables bytes each (null when 0): a session step's tables,
  // staged, then copied to the device in one piece.
  int32_t* staged_step_tables() const { return static_cast<int32_t*>(h_step_.get()); }
  int32_t* device_step_tables() const { return static_cast<int32_t*>(d_step_.get()); }

  // Pinned staging: q, k, v at multiples of sizes().tensor, then the two
  // cu_seqlens; O, then the LSE at sizes().tensor.
  char* staged_input(Input input) const;
  char* staged_cu(int which) const;
  char* staged_out() const { return static_cast<char*>(h_out_.get()); }
  char* staged_lse() const { return staged_out() + sizes_.tensor; }

  PinnedOutputPool& lent_outputs() const { return *lent_out_; }
  ChunkedUpload* ring() const { return ring_.get(); }  // null without --staging_chunk_bytes
  const std::optional<HeapArena>& heap() const { return heap_; }
  H2DBatch& heap_copies() { return heap_copies_; }
  ParallelCopier& copier() const { return *copier_; }

  // How inline inputs reach the device, for the start-up log.
  std::string StagingDescription() const;

 private:
  CudaSlot(const DeviceInfo& device, int stream_index, const CudaBufferSizes& sizes,
           std::shared_ptr<ParallelCopier> copier, std::optional<HeapArena> heap);

  const int ordinal_;
  const std::string name_;
  const CudaBufferSizes sizes_;
  const std::shared_ptr<ParallelCopier> copier_;  // shared by every slot
  CudaStream stream_;
  CudaEvent start_, h2d_done_, kernel_done_, d2h_done_;
  DeviceBuffer d_q_, d_k_, d_v_, d_out_, d_lse_, d_cu_q_, d_cu_k_, d_workspace_, d_step_;
  PinnedBuffer h_step_;  // a step's tables
  PinnedBuffer h_in_;   // q, k, v, cu_seqlens_q, cu_seqlens_k
  PinnedBuffer h_out_;  // o, lse
  std::shared_ptr<PinnedOutputPool> lent_out_;  // o, lse laid out as in h_out_
  PinnedBuffer ring_memory_;
  std::unique_ptr<ChunkedUpload> ring_;
  const std::optional<HeapArena> heap_;
  H2DBatch heap_copies_;
};

}  // namespace attn::server

#endif  // ATTN_SERVER_CUDA_SLOT_H_
