#include "backends/heap_arena.h"

#include <atomic>

namespace attn::server {
namespace {

// Set once, before servers start; read by their start-up.
std::atomic<int (*)(size_t)> arm_fn{nullptr};
std::atomic<int (*)(void**, size_t*)> arena_fn{nullptr};

}  // namespace

void ProvidePinnedHeap(PinnedHeapApi api) {
  arena_fn.store(api.arena, std::memory_order_release);
  arm_fn.store(api.arm, std::memory_order_release);
}

bool HasPinnedHeap() {
  return arm_fn.load(std::memory_order_acquire) != nullptr &&
         arena_fn.load(std::memory_order_acquire) != nullptr;
}

std::optional<HeapArena> ArmHeapArena(size_t bytes) {
  auto arm = arm_fn.load(std::memory_order_acquire);
  if (arm == nullptr || arm(bytes) != 1) return std::nullopt;
  return FindHeapArena();
}

std::optional<HeapArena> FindHeapArena() {
  auto arena = arena_fn.load(std::memory_order_acquire);
  if (arena == nullptr) return std::nullopt;
  void* base = nullptr;
  size_t bytes = 0;
  if (arena(&base, &bytes) != 1 || base == nullptr || bytes == 0) return std::nullopt;
  return HeapArena{static_cast<char*>(base), bytes};
}

}  // namespace attn::server
