// server/backends/heap_arena.h
//
// HeapArena: the arena of libattn_pinned_heap.so (pinned_heap/pinned_heap.h)
// when this process was started with it (LD_PRELOAD), found by dlsym. The
// CUDA backend page-locks it once; inline tensors whose every piece lies in
// it (the slices gRPC read them into) then go to the GPU by DMA straight
// from there, with no staging copy; pieces outside it are staged alone.
#ifndef ATTN_SERVER_HEAP_ARENA_H_
#define ATTN_SERVER_HEAP_ARENA_H_

#include <cstddef>
#include <cstdint>
#include <optional>

#include "scheduling/tensor_bytes.h"

namespace attn::server {

struct HeapArena {
  char* base = nullptr;
  size_t bytes = 0;

  // Whether all of `piece` lies inside the arena.
  bool Contains(absl::string_view piece) const {
    return piece.data() >= base && piece.data() + piece.size() <= base + bytes;
  }
  // How many of `tensor`'s bytes lie in pieces inside the arena.
  int64_t BytesInside(const TensorBytes& tensor) const {
    int64_t inside = 0;
    for (absl::string_view piece : tensor.pieces()) {
      if (Contains(piece)) inside += static_cast<int64_t>(piece.size());
    }
    return inside;
  }
};

// The preloaded shim's arena, reserved now if it was not yet; nullopt when
// the shim is not loaded or could not reserve it.
std::optional<HeapArena> FindPreloadedHeapArena();

}  // namespace attn::server

#endif  // ATTN_SERVER_HEAP_ARENA_H_
