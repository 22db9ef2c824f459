// attn/client/shared_memory.h
//
// SharedMemory: a POSIX shared-memory object this process creates, maps
// read-write and unlinks when done: the memory of a system region
// (AttentionClient::RegisterSystemRegion) that a same-host attn_server reads
// inputs from and writes outputs to in place.
//
//   auto shm = attn::SharedMemory::Create(64 << 20);      // "/attn-<pid>-<n>"
//   auto info = client->RegisterSystemRegion("io", (*shm)->name(), 0, (*shm)->size());
//   std::memcpy((*shm)->data(), q.data(), q.size());
//   inputs.q_ref = {info->region_id(), 0, (int64_t)q.size()};
#ifndef ATTN_CLIENT_SHARED_MEMORY_H_
#define ATTN_CLIENT_SHARED_MEMORY_H_

#include <cstdint>
#include <memory>
#include <string>

#include "absl/status/statusor.h"

namespace attn {

class SharedMemory {
 public:
  // Creates (exclusively, mode 0600) and maps an object of `bytes` bytes,
  // zero-filled. Empty `name`: a fresh "/attn-<pid>-<n>".
  static absl::StatusOr<std::unique_ptr<SharedMemory>> Create(int64_t bytes,
                                                              std::string name = "");
  // Unmaps and unlinks (a server that mapped it keeps its mapping).
  ~SharedMemory();
  SharedMemory(const SharedMemory&) = delete;
  SharedMemory& operator=(const SharedMemory&) = delete;

  const std::string& name() const { return name_; }
  char* data() const { return data_; }
  int64_t size() const { return size_; }

 private:
  SharedMemory(std::string name, char* data, int64_t size)
      : name_(std::move(name)), data_(data), size_(size) {}
  const std::string name_;
  char* const data_;
  const int64_t size_;
};

}  // namespace attn

#endif  // ATTN_CLIENT_SHARED_MEMORY_H_
