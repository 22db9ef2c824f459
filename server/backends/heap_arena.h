// server/backends/heap_arena.h
//
// HeapArena: the arena of the pinned heap (pinned_heap/pinned_heap.h),
// attn_server's malloc. The server library runs in processes without it too
// (tests, sanitizer builds), so a binary that links the heap hands its
// entry points over (ProvidePinnedHeap) before the backend is created.
// Armed at start-up (backend.cc); the CUDA backend page-locks it once;
// inline tensors mostly in it (the slices gRPC read them into) then go to
// the GPU by DMA straight from there, with no staging copy; pieces outside
// it are staged alone.
#ifndef ATTN_SERVER_HEAP_ARENA_H_
#define ATTN_SERVER_HEAP_ARENA_H_

#include <cstddef>
#include <cstdint>
#include <optional>

#include "core/tensor_place.h"

namespace attn::server {

struct HeapArena {
  char* base = nullptr;
  size_t bytes = 0;

  // Whether all of `piece` lies inside the arena.
  bool Contains(absl::string_view piece) const {
    return piece.data() >= base && piece.data() + piece.size() <= base + bytes;
  }
  // How many of `tensor`'s bytes lie in pieces inside the arena.
  int64_t BytesInside(const TensorSource& tensor) const {
    int64_t inside = 0;
    for (absl::string_view piece : tensor.pieces()) {
      if (Contains(piece)) inside += static_cast<int64_t>(piece.size());
    }
    return inside;
  }
};

// The pinned heap's C entry points (pinned_heap.h).
struct PinnedHeapApi {
  int (*arm)(size_t bytes) = nullptr;
  int (*arena)(void** base, size_t* bytes) = nullptr;
  size_t (*used_bytes)() = nullptr;
  size_t (*overflows)() = nullptr;
};

// Called by a binary that links the pinned heap (attn_server's main, tests),
// before any server is created; the library has no heap until then.
void ProvidePinnedHeap(PinnedHeapApi api);

// Whether this process has been given the pinned heap.
bool HasPinnedHeap();

// Arms the pinned heap with an arena of `bytes` (pinned_heap.h: once per
// process; a later call keeps the first arena) and returns it; nullopt when
// this process has no pinned heap or it could not reserve the arena.
std::optional<HeapArena> ArmHeapArena(size_t bytes);

// The pinned heap's arena once armed; nullopt before, or without the heap.
std::optional<HeapArena> FindHeapArena();

// What the armed heap holds (all 0 when it is not armed), for the metrics.
struct PinnedHeapUsage {
  int64_t arena_bytes = 0;
  int64_t used_bytes = 0;  // allocated now, headers and rounding included
  int64_t overflows = 0;   // large allocations it had no room for, since start
};
PinnedHeapUsage ReadPinnedHeapUsage();

}  // namespace attn::server

#endif  // ATTN_SERVER_HEAP_ARENA_H_
