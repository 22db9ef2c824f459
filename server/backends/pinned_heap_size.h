// server/backends/pinned_heap_size.h
//
// How large the pinned heap's arena is (--pinned_heap_bytes), bounded by the
// host's memory: on the CUDA backend the whole arena is page-locked at
// start-up, so an arena near the memory the process may use would leave
// nothing for the rest of it, or get the process killed.
#ifndef ATTN_SERVER_PINNED_HEAP_SIZE_H_
#define ATTN_SERVER_PINNED_HEAP_SIZE_H_

#include <cstdint>
#include <optional>

#include "absl/status/statusor.h"

namespace attn::server {

// The memory this process may use: the host's physical memory, or its
// cgroup's limit (v2 memory.max, v1 memory.limit_in_bytes) when lower;
// nullopt when neither can be read.
std::optional<int64_t> HostMemoryBytes();

// The arena for --pinned_heap_bytes=`requested` (0 = off):
//   -1 (auto): the admitted-bytes budget where the backend uses the heap
//      by default (`by_default`), at most a quarter of `host_memory`;
//      0 elsewhere;
//   N: N, unless N is more than half of `host_memory`: INVALID_ARGUMENT
//      naming the flag and the limit.
// `host_memory` unknown (nullopt) bounds nothing.
absl::StatusOr<int64_t> ResolvePinnedHeapBytes(int64_t requested, int64_t admitted_budget,
                                               bool by_default,
                                               std::optional<int64_t> host_memory);

}  // namespace attn::server

#endif  // ATTN_SERVER_PINNED_HEAP_SIZE_H_
