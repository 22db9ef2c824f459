#include "backends/heap_arena.h"

#include <dlfcn.h>

namespace attn::server {

std::optional<HeapArena> FindPreloadedHeapArena() {
  // The shim's C entry point (pinned_heap/pinned_heap.h), looked up rather
  // than linked: attn_server runs without the shim by default.
  using ArenaFn = int (*)(void**, size_t*);
  auto arena = reinterpret_cast<ArenaFn>(dlsym(RTLD_DEFAULT, "attn_pinned_heap_arena"));
  if (arena == nullptr) return std::nullopt;
  void* base = nullptr;
  size_t bytes = 0;
  if (arena(&base, &bytes) != 1 || base == nullptr || bytes == 0) return std::nullopt;
  return HeapArena{static_cast<char*>(base), bytes};
}

}  // namespace attn::server
