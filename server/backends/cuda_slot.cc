#include "backends/cuda_slot.h"

#include <algorithm>
#include <utility>

#include "absl/strings/str_format.h"
#include "core/status_util.h"

namespace attn::server {
namespace {

// With --staging_chunk_bytes, slots in each ring (chunked_upload.h). A slot
// is written again only after its DMA finished; the DMA of a chunk (40+
// GB/s) is several times quicker than its copy, so with four slots the
// copies seldom wait for one.
constexpr int kRingSlots = 4;

}  // namespace

CudaBufferSizes CudaBufferSizes::For(int64_t max_tensor_bytes, int64_t max_rows,
                                     int64_t workspace_bytes) {
  CudaBufferSizes b;
  b.workspace = workspace_bytes;
  b.tensor = max_tensor_bytes;
  b.lse = max_rows * static_cast<int64_t>(sizeof(float));
  b.cu = (max_rows + 1) * static_cast<int64_t>(sizeof(int32_t));
  return b;
}

CudaBufferSizes CudaBufferSizes::WithStepTables(int max_steps, int64_t max_block_entries) const {
  CudaBufferSizes b = *this;
  // cu_seqlens_q (steps + 1), cache_seqlens (steps), the block table.
  b.step_tables = max_steps > 0 ? (2 * int64_t{max_steps} + 1 + max_block_entries) *
                                      static_cast<int64_t>(sizeof(int32_t))
                                : 0;
  return b;
}

absl::Status CheckDeviceMemory(const DeviceInfo& device, int streams,
                               const CudaBufferSizes& sizes) {
  CUDA_RETURN_IF_ERROR(cudaSetDevice(device.ordinal), device.ordinal);
  size_t free_bytes = 0, total_bytes = 0;
  CUDA_RETURN_IF_ERROR(cudaMemGetInfo(&free_bytes, &total_bytes), device.ordinal);
  const double needed = static_cast<double>(sizes.Device()) * streams;
  if (needed > static_cast<double>(free_bytes)) {
    return absl::ResourceExhaustedError(absl::StrFormat(
        "cuda:%d (%s) has %.0f MiB free; %d streams (--streams_per_device) x (4 tensors of "
        "%.0f MiB (--max_tokens_per_request) + %.1f MiB LSE and offsets + %.1f MiB kernel "
        "workspace) need %.0f MiB",
        device.ordinal, device.name, free_bytes / 1048576.0, streams, sizes.tensor / 1048576.0,
        (sizes.lse + 2 * sizes.cu + sizes.step_tables) / 1048576.0, sizes.workspace / 1048576.0,
        needed / 1048576.0));
  }
  return absl::OkStatus();
}

CudaSlot::CudaSlot(const DeviceInfo& device, int stream_index, const CudaBufferSizes& sizes,
                   std::shared_ptr<ParallelCopier> copier, std::optional<HeapArena> heap)
    : ordinal_(device.ordinal),
      name_(absl::StrFormat("%s (cuda:%d, stream %d)", device.name, device.ordinal, stream_index)),
      sizes_(sizes),
      copier_(std::move(copier)),
      heap_(heap),
      heap_copies_(device.ordinal) {}

absl::StatusOr<std::unique_ptr<CudaSlot>> CudaSlot::Create(
    const DeviceInfo& device, int stream_index, const CudaBufferSizes& sizes,
    std::shared_ptr<ParallelCopier> copier, int64_t staging_chunk_bytes,
    std::optional<HeapArena> heap) {
  const int ordinal = device.ordinal;
  CUDA_RETURN_IF_ERROR(cudaSetDevice(ordinal), ordinal);
  std::unique_ptr<CudaSlot> s(new CudaSlot(device, stream_index, sizes, std::move(copier), heap));
  ASSIGN_OR_RETURN(s->stream_, CreateStream(ordinal));
  ASSIGN_OR_RETURN(s->start_, CreateEvent(ordinal, false));
  ASSIGN_OR_RETURN(s->h2d_done_, CreateEvent(ordinal, false));
  ASSIGN_OR_RETURN(s->kernel_done_, CreateEvent(ordinal, false));
  ASSIGN_OR_RETURN(s->d2h_done_, CreateEvent(ordinal, /*blocking_sync=*/true));
  for (DeviceBuffer* buffer : {&s->d_q_, &s->d_k_, &s->d_v_, &s->d_out_}) {
    ASSIGN_OR_RETURN(*buffer, AllocateDevice(static_cast<size_t>(sizes.tensor), ordinal));
  }
  ASSIGN_OR_RETURN(s->d_lse_, AllocateDevice(static_cast<size_t>(sizes.lse), ordinal));
  for (DeviceBuffer* buffer : {&s->d_cu_q_, &s->d_cu_k_}) {
    ASSIGN_OR_RETURN(*buffer, AllocateDevice(static_cast<size_t>(sizes.cu), ordinal));
  }
  if (sizes.workspace > 0) {
    ASSIGN_OR_RETURN(s->d_workspace_,
                     AllocateDevice(static_cast<size_t>(sizes.workspace), ordinal));
  }
  if (sizes.step_tables > 0) {
    ASSIGN_OR_RETURN(s->d_step_, AllocateDevice(static_cast<size_t>(sizes.step_tables), ordinal));
    ASSIGN_OR_RETURN(s->h_step_, AllocatePinned(static_cast<size_t>(sizes.step_tables), ordinal));
  }
  ASSIGN_OR_RETURN(s->h_in_, AllocatePinned(static_cast<size_t>(sizes.PinnedIn()), ordinal));
  ASSIGN_OR_RETURN(s->h_out_, AllocatePinned(static_cast<size_t>(sizes.PinnedOut()), ordinal));
  ASSIGN_OR_RETURN(s->lent_out_,
                   PinnedOutputPool::Create(kLentOutputs * static_cast<size_t>(sizes.PinnedOut()),
                                            ordinal));
  // The ring has memory of its own: a launch may stage some pieces (a
  // heap tensor's pieces outside the arena) while others go through the
  // ring, and the ring rewrites its slots before those staged pieces' DMA
  // has run. Slots are whole multiples of 256 bytes, at most a quarter of
  // the three input tensors.
  const size_t slot_bytes =
      std::min<size_t>(static_cast<size_t>(std::max<int64_t>(staging_chunk_bytes, 0)),
                       static_cast<size_t>(3 * sizes.tensor) / kRingSlots) &
      ~size_t{255};
  if (slot_bytes > 0) {
    ASSIGN_OR_RETURN(s->ring_memory_, AllocatePinned(kRingSlots * slot_bytes, ordinal));
    ASSIGN_OR_RETURN(s->ring_,
                     ChunkedUpload::Create(static_cast<char*>(s->ring_memory_.get()), slot_bytes,
                                           kRingSlots, ordinal, s->copier_.get()));
  }
  return s;
}

CudaSlot::~CudaSlot() {
  // Resources are released with their device current; nothing may still
  // be running on the stream.
  if (cudaSetDevice(ordinal_) == cudaSuccess && stream_.get() != nullptr) {
    cudaStreamSynchronize(stream_.get());
  }
}

char* CudaSlot::device_input(Input input) const {
  const DeviceBuffer* buffers[3] = {&d_q_, &d_k_, &d_v_};
  return static_cast<char*>(buffers[static_cast<int>(input)]->get());
}

int32_t* CudaSlot::device_cu(int which) const {
  return static_cast<int32_t*>((which == 0 ? d_cu_q_ : d_cu_k_).get());
}

char* CudaSlot::staged_input(Input input) const {
  return static_cast<char*>(h_in_.get()) + static_cast<int64_t>(input) * sizes_.tensor;
}

char* CudaSlot::staged_cu(int which) const {
  return static_cast<char*>(h_in_.get()) + 3 * sizes_.tensor + which * sizes_.cu;
}

std::string CudaSlot::StagingDescription() const {
  std::string how = ring_ == nullptr
                        ? std::string("inputs staged whole")
                        : absl::StrFormat("inputs staged through a ring of %d x %.2f MiB",
                                          ring_->slots(), ring_->slot_bytes() / 1048576.0);
  if (heap_.has_value()) how += " unless gRPC received them into the pinned heap";
  return how;
}

}  // namespace attn::server
