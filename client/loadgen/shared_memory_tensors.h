// client/loadgen/shared_memory_tensors.h
//
// attn_loadgen --shared_memory=system|cuda (perf_analyzer's
// --shared-memory): the request's Q, K and V sit in one registered region
// and each request writes O (and the LSE) into one of `slots` output slots
// of another, so no tensor byte travels in the messages. System regions
// are POSIX shared memory this process creates; CUDA regions are GPU
// memory it allocates and exports by IPC handle (a same-GPU server's kernel
// then reads and writes them in place).
//
// Requests take the slots round robin; with `slots` >= the requests in
// flight, no two requests in flight write the same slot.
#ifndef ATTN_CLIENT_LOADGEN_SHARED_MEMORY_TENSORS_H_
#define ATTN_CLIENT_LOADGEN_SHARED_MEMORY_TENSORS_H_

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "attn/client/attention_client.h"
#include "attn/client/shared_memory.h"
#include "device_buffer.h"

namespace attn::loadgen {

enum class SharedMemoryKind { kNone, kSystem, kCuda };
// "none", "system", "cuda"; INVALID_ARGUMENT naming --shared_memory otherwise.
absl::StatusOr<SharedMemoryKind> ParseSharedMemoryKind(const std::string& text);

class SharedMemoryTensors {
 public:
  // Copies `inputs`' Q, K, V into a new input region and leaves `inputs`
  // referencing it (its own bytes cleared); makes `slots` output slots for
  // calls like `call`; registers both with `client` (CUDA: on `device`).
  static absl::StatusOr<std::unique_ptr<SharedMemoryTensors>> Create(
      SharedMemoryKind kind, int device, int slots, AttentionClient& client,
      AttentionInputs* inputs, const AttendOptions& call);

  // `call` writing into slot i, for each slot.
  std::vector<AttendOptions> SlotCalls(const AttendOptions& call) const;
  // Slot i's O and LSE bytes as they are now.
  absl::StatusOr<std::string> ReadOut(int slot) const;
  absl::StatusOr<std::string> ReadLse(int slot) const;
  // One line: kind, regions and their sizes.
  std::string Describe() const;

 private:
  SharedMemoryTensors() = default;
  absl::Status Read(int64_t offset, int64_t bytes, std::string* out) const;

  SharedMemoryKind kind_ = SharedMemoryKind::kNone;
  int slots_ = 0;
  int64_t q_bytes_ = 0, lse_bytes_ = 0, slot_stride_ = 0;
  std::string out_region_id_;
  // The memory: system or CUDA, inputs and outputs.
  std::unique_ptr<SharedMemory> system_in_, system_out_;
  std::unique_ptr<DeviceBuffer> device_in_, device_out_;
};

}  // namespace attn::loadgen

#endif  // ATTN_CLIENT_LOADGEN_SHARED_MEMORY_TENSORS_H_
