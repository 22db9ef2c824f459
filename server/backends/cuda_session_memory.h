// server/backends/cuda_session_memory.h
//
// The KV-cache page pool of the CUDA backend: one device's memory,
// allocated and zeroed once at start-up (cuda_session_memory.cc; in a build
// without CUDA, cuda_executor_none.cc refuses). Page copies (forks,
// truncations) run on a stream of their own and are waited for.
#ifndef ATTN_SERVER_CUDA_SESSION_MEMORY_H_
#define ATTN_SERVER_CUDA_SESSION_MEMORY_H_

#include <cstdint>
#include <memory>

#include "absl/status/statusor.h"
#include "attn/device.h"
#include "sessions/session_memory.h"

namespace attn::server {

// `pool_bytes` of pages of `page_bytes`, or with `free_fraction` > 0 that
// fraction of the device's free memory. RESOURCE_EXHAUSTED naming the flag
// when the device has no room (or the fraction holds no page).
absl::StatusOr<std::unique_ptr<SessionMemory>> CreateCudaSessionMemory(const DeviceInfo& device,
                                                                       int64_t pool_bytes,
                                                                       double free_fraction,
                                                                       int64_t page_bytes);

}  // namespace attn::server

#endif  // ATTN_SERVER_CUDA_SESSION_MEMORY_H_
