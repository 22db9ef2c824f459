// The pinned heap (pinned_heap.h): large allocations from one arena
// the CUDA backend page-locks; the rest forwarded to glibc.
//
// Runs inside malloc: no allocation of its own on the large path except the
// free-range map's nodes, which are small and so go to glibc; no exceptions
// escape (the map's allocator failing aborts, as malloc in glibc would
// not, but a process that cannot allocate 48 bytes is lost anyway).
#include "pinned_heap.h"

#include <dlfcn.h>
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#include <atomic>
#include <mutex>
#include <new>
#include <optional>

#include "pinned_heap/first_fit_ranges.h"

extern "C" {
// glibc's allocator under its exported internal names (glibc 2.2.5 on).
void* __libc_malloc(size_t bytes);
void __libc_free(void* pointer);
void* __libc_realloc(void* pointer, size_t bytes);
}

namespace {

using attn::server::FirstFitRanges;

// Before each block: its size, so free() can return it. 64 bytes keep the
// payload 64-byte aligned (malloc promises 16).
struct alignas(64) Header {
  size_t payload_bytes;
  size_t block_bytes;
  uint64_t magic;
};
constexpr uint64_t kMagic = 0x61747470696e6e64ULL;  // "attpinnd"
constexpr size_t kAlignment = 64;

// gRPC 1.51 reads sockets into 64 KiB slices (plus a small header): every
// piece of a received tensor is one of them. Measured on the H200 host with
// 256 KiB: not one piece of a 1-4 MiB tensor was in the arena.
constexpr size_t kMinAlloc = size_t{64} << 10;

class Arena {
 public:
  // Reserves `bytes` (rounded up to 2 MiB) and starts serving large
  // allocations from them; false if mmap failed. Once armed, later calls
  // change nothing and return true.
  bool Arm(size_t bytes) {
    std::lock_guard<std::mutex> lock(mu_);
    if (base_ != nullptr) return true;
    if (bytes == 0) return false;
    bytes = attn::server::AlignUp(bytes, size_t{2} << 20);
    void* p = mmap(nullptr, bytes, PROT_READ | PROT_WRITE,
                   MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (p == MAP_FAILED) return false;
    madvise(p, bytes, MADV_HUGEPAGE);  // fewer pages to lock and to walk; best effort
    ranges_ = new (ranges_storage_) FirstFitRanges(bytes, kAlignment);
    base_ = static_cast<char*>(p);
    bytes_ = bytes;
    base_atomic_.store(base_, std::memory_order_release);
    min_alloc_.store(kMinAlloc, std::memory_order_release);
    return true;
  }

  // A block of `bytes` in the arena; null when it is not armed, `bytes` is
  // below the threshold, or there is no room.
  void* Allocate(size_t bytes) {
    // Until armed the threshold is SIZE_MAX: one load, then glibc.
    if (bytes < min_alloc_.load(std::memory_order_acquire)) return nullptr;
    std::lock_guard<std::mutex> lock(mu_);
    if (ranges_ == nullptr) return nullptr;  // not armed: malloc(SIZE_MAX)
    const size_t block = sizeof(Header) + bytes;
    if (block < bytes) return nullptr;  // overflow
    const std::optional<size_t> offset = ranges_->Take(block);
    if (!offset) {
      overflows_.fetch_add(1, std::memory_order_relaxed);
      return nullptr;
    }
    const size_t rounded = ranges_->Rounded(block);
    used_ += rounded;
    auto* header = reinterpret_cast<Header*>(base_ + *offset);
    header->payload_bytes = bytes;
    header->block_bytes = rounded;
    header->magic = kMagic;
    return header + 1;
  }

  // Whether `pointer` came from Allocate (the arena never moves).
  bool Owns(const void* pointer) const {
    const char* p = static_cast<const char*>(pointer);
    const char* base = base_atomic_.load(std::memory_order_acquire);
    return base != nullptr && p >= base && p < base + bytes_;
  }

  static Header* HeaderOf(void* pointer) { return static_cast<Header*>(pointer) - 1; }

  void Free(void* pointer) {
    Header* header = HeaderOf(pointer);
    if (header->magic != kMagic) abort();  // not ours, or freed twice
    header->magic = 0;
    std::lock_guard<std::mutex> lock(mu_);
    used_ -= header->block_bytes;
    ranges_->Return(static_cast<size_t>(reinterpret_cast<char*>(header) - base_),
                    header->block_bytes);
  }

  bool Describe(void** base, size_t* bytes) {
    std::lock_guard<std::mutex> lock(mu_);
    if (base_ == nullptr) return false;
    *base = base_;
    *bytes = bytes_;
    return true;
  }
  size_t used() {
    std::lock_guard<std::mutex> lock(mu_);
    return used_;
  }
  size_t overflows() const { return overflows_.load(std::memory_order_relaxed); }

 private:
  std::mutex mu_;
  char* base_ = nullptr;  // guarded by mu_; base_atomic_ for Owns
  std::atomic<char*> base_atomic_{nullptr};
  size_t bytes_ = 0;  // set once, before base_atomic_
  size_t used_ = 0;
  std::atomic<size_t> overflows_{0};
  // The smallest allocation served from the arena: SIZE_MAX until armed,
  // then kMinAlloc (stored after the arena is set up).
  std::atomic<size_t> min_alloc_{~size_t{0}};
  FirstFitRanges* ranges_ = nullptr;
  alignas(FirstFitRanges) unsigned char ranges_storage_[sizeof(FirstFitRanges)] = {};
};

// Constant-initialized (no constructor runs, C++20's constinit checks it),
// so usable before any static constructor: the loader and libc allocate
// before main.
constinit Arena arena;

// glibc's malloc_usable_size, which this library's definition hides. No
// __libc_ name exports it; dlsym(RTLD_NEXT) finds it (and allocates
// nothing on success).
size_t GlibcUsableSize(void* pointer) {
  using Fn = size_t (*)(void*);
  static std::atomic<Fn> fn{nullptr};
  Fn f = fn.load(std::memory_order_acquire);
  if (f == nullptr) {
    f = reinterpret_cast<Fn>(dlsym(RTLD_NEXT, "malloc_usable_size"));
    if (f == nullptr) return 0;
    fn.store(f, std::memory_order_release);
  }
  return f(pointer);
}

}  // namespace

extern "C" {

__attribute__((visibility("default"))) void* malloc(size_t bytes) {
  if (void* p = arena.Allocate(bytes)) return p;
  return __libc_malloc(bytes);
}

__attribute__((visibility("default"))) void free(void* pointer) {
  if (pointer == nullptr) return;
  if (arena.Owns(pointer)) {
    arena.Free(pointer);
  } else {
    __libc_free(pointer);
  }
}

__attribute__((visibility("default"))) void* realloc(void* pointer, size_t bytes) {
  if (pointer == nullptr) return malloc(bytes);
  // glibc's blocks stay glibc's, however large they grow.
  if (!arena.Owns(pointer)) return __libc_realloc(pointer, bytes);
  if (bytes == 0) {
    free(pointer);
    return nullptr;
  }
  const size_t old = Arena::HeaderOf(pointer)->payload_bytes;
  if (bytes <= old && bytes >= old / 2) return pointer;  // shrink in place
  void* moved = malloc(bytes);
  if (moved == nullptr) return nullptr;
  memcpy(moved, pointer, old < bytes ? old : bytes);
  free(pointer);
  return moved;
}

__attribute__((visibility("default"))) void* reallocarray(void* pointer, size_t count,
                                                          size_t size) {
  size_t bytes = 0;
  if (__builtin_mul_overflow(count, size, &bytes)) {
    errno = ENOMEM;
    return nullptr;
  }
  return realloc(pointer, bytes);
}

__attribute__((visibility("default"))) size_t malloc_usable_size(void* pointer) {
  if (pointer == nullptr) return 0;
  if (arena.Owns(pointer)) return Arena::HeaderOf(pointer)->payload_bytes;
  return GlibcUsableSize(pointer);
}

__attribute__((visibility("default"))) int attn_pinned_heap_arm(size_t bytes) {
  return arena.Arm(bytes) ? 1 : 0;
}

__attribute__((visibility("default"))) int attn_pinned_heap_arena(void** base, size_t* bytes) {
  return arena.Describe(base, bytes) ? 1 : 0;
}

__attribute__((visibility("default"))) size_t attn_pinned_heap_used_bytes(void) {
  return arena.used();
}

__attribute__((visibility("default"))) size_t attn_pinned_heap_overflows(void) {
  return arena.overflows();
}

}  // extern "C"
