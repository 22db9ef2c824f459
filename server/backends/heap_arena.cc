#include "backends/heap_arena.h"

#include <atomic>

namespace attn::server {
namespace {

// Set once, before servers start; read by their start-up and the metrics.
std::atomic<int (*)(size_t)> arm_fn{nullptr};
std::atomic<int (*)(void**, size_t*)> arena_fn{nullptr};
std::atomic<size_t (*)()> used_fn{nullptr};
std::atomic<size_t (*)()> overflows_fn{nullptr};

}  // namespace

void ProvidePinnedHeap(PinnedHeapApi api) {
  used_fn.store(api.used_bytes, std::memory_order_release);
  overflows_fn.store(api.overflows, std::memory_order_release);
  arena_fn.store(api.arena, std::memory_order_release);
  arm_fn.store(api.arm, std::memory_order_release);
}

PinnedHeapUsage ReadPinnedHeapUsage() {
  PinnedHeapUsage usage;
  const std::optional<HeapArena> arena = FindHeapArena();
  if (!arena.has_value()) return usage;
  usage.arena_bytes = static_cast<int64_t>(arena->bytes);
  if (auto used = used_fn.load(std::memory_order_acquire)) {
    usage.used_bytes = static_cast<int64_t>(used());
  }
  if (auto overflows = overflows_fn.load(std::memory_order_acquire)) {
    usage.overflows = static_cast<int64_t>(overflows());
  }
  return usage;
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
