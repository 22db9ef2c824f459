// The pinned heap (server/pinned_heap/pinned_heap.h) interposing this
// test's malloc (linked into it, as into attn_server): large blocks
// come from the arena and go back to it, small ones and overflow stay
// glibc's, realloc and malloc_usable_size know both kinds, and many
// threads at once leave every byte where it was written. Dormant until
// armed: the first test checks that, then arms a 64 MiB arena, which the
// others use (gtest runs them in order).
#include "pinned_heap/pinned_heap.h"

#include <malloc.h>

#include <atomic>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>
#include <random>
#include <thread>
#include <vector>

#include "gtest/gtest.h"

namespace {

constexpr size_t kMinAlloc = size_t{64} << 10;

struct Arena {
  char* base = nullptr;
  size_t bytes = 0;
  bool Holds(const void* p) const {
    return static_cast<const char*>(p) >= base && static_cast<const char*>(p) < base + bytes;
  }
};

constexpr size_t kArenaBytes = size_t{64} << 20;

// The arena, armed on first use.
Arena TheArena() {
  EXPECT_EQ(attn_pinned_heap_arm(kArenaBytes), 1);
  void* base = nullptr;
  size_t bytes = 0;
  EXPECT_EQ(attn_pinned_heap_arena(&base, &bytes), 1);
  return Arena{static_cast<char*>(base), bytes};
}

// Malloc through a volatile pointer, so the compiler cannot pair and drop a
// malloc with its free.
void* (*volatile do_malloc)(size_t) = std::malloc;
void (*volatile do_free)(void*) = std::free;
void* (*volatile do_realloc)(void*, size_t) = std::realloc;

TEST(PinnedHeapTest, DormantUntilArmedThenArmedOnce) {
  void* base = nullptr;
  size_t bytes = 0;
  ASSERT_EQ(attn_pinned_heap_arena(&base, &bytes), 0) << "armed before any test armed it";
  void* before = do_malloc(size_t{1} << 20);
  ASSERT_NE(before, nullptr);
  EXPECT_EQ(attn_pinned_heap_arm(0), 0) << "an empty arena is refused";
  const Arena arena = TheArena();
  ASSERT_EQ(arena.bytes, kArenaBytes);
  EXPECT_FALSE(arena.Holds(before)) << "allocated before arming: glibc's";
  EXPECT_EQ(attn_pinned_heap_used_bytes(), 0u);
  EXPECT_EQ(attn_pinned_heap_arm(size_t{1} << 30), 1) << "armed already";
  void* again = nullptr;
  ASSERT_EQ(attn_pinned_heap_arena(&again, &bytes), 1);
  EXPECT_EQ(again, arena.base) << "a second arm keeps the first arena";
  EXPECT_EQ(bytes, kArenaBytes);
  do_free(before);  // glibc's block, freed after arming
  void* after = do_malloc(size_t{1} << 20);
  EXPECT_TRUE(arena.Holds(after));
  do_free(after);
  EXPECT_EQ(attn_pinned_heap_used_bytes(), 0u);
}

TEST(PinnedHeapTest, LargeBlocksComeFromTheArenaAndGoBack) {
  const Arena arena = TheArena();
  ASSERT_EQ(arena.bytes, kArenaBytes);
  const size_t used_before = attn_pinned_heap_used_bytes();
  void* small = do_malloc(kMinAlloc - 1);
  void* large = do_malloc(kMinAlloc);
  ASSERT_NE(small, nullptr);
  ASSERT_NE(large, nullptr);
  EXPECT_FALSE(arena.Holds(small));
  EXPECT_TRUE(arena.Holds(large));
  EXPECT_EQ(reinterpret_cast<uintptr_t>(large) % 64, 0u);
  EXPECT_GE(attn_pinned_heap_used_bytes(), used_before + kMinAlloc);
  std::memset(large, 0x3c, kMinAlloc);
  EXPECT_EQ(malloc_usable_size(large), kMinAlloc);
  EXPECT_GE(malloc_usable_size(small), kMinAlloc - 1);
  do_free(large);
  do_free(small);
  EXPECT_EQ(attn_pinned_heap_used_bytes(), used_before);
  // operator new goes through malloc too.
  auto vector = std::make_unique<std::vector<char>>(size_t{1} << 20, 'x');
  EXPECT_TRUE(arena.Holds(vector->data()));
}

TEST(PinnedHeapTest, OverflowGoesToGlibcAndFreesThere) {
  const Arena arena = TheArena();
  const size_t overflows_before = attn_pinned_heap_overflows();
  std::vector<void*> blocks;
  void* outside = nullptr;
  for (int i = 0; i < 100 && outside == nullptr; ++i) {
    void* p = do_malloc(size_t{4} << 20);
    ASSERT_NE(p, nullptr);
    std::memset(p, i, size_t{4} << 20);
    if (arena.Holds(p)) {
      blocks.push_back(p);
    } else {
      outside = p;
    }
  }
  ASSERT_NE(outside, nullptr) << "a 64 MiB arena took 100 blocks of 4 MiB";
  EXPECT_GE(blocks.size(), 14u);
  EXPECT_EQ(attn_pinned_heap_overflows(), overflows_before + 1);
  do_free(outside);
  for (void* p : blocks) do_free(p);
  void* again = do_malloc(size_t{4} << 20);
  EXPECT_TRUE(arena.Holds(again)) << "freed blocks are reused";
  do_free(again);
}

TEST(PinnedHeapTest, ReallocKeepsTheBytesAcrossBothKinds) {
  const Arena arena = TheArena();
  std::string pattern(kMinAlloc, '\0');  // itself in the arena
  std::mt19937 rng(5);
  for (char& c : pattern) c = static_cast<char>(rng());
  const size_t used_before = attn_pinned_heap_used_bytes();
  char* p = static_cast<char*>(do_malloc(kMinAlloc));
  ASSERT_TRUE(arena.Holds(p));
  std::memcpy(p, pattern.data(), kMinAlloc);
  char* grown = static_cast<char*>(do_realloc(p, 3 * kMinAlloc));
  ASSERT_TRUE(arena.Holds(grown));
  EXPECT_EQ(std::memcmp(grown, pattern.data(), kMinAlloc), 0);
  char* shrunk = static_cast<char*>(do_realloc(grown, 2 * kMinAlloc));
  EXPECT_EQ(shrunk, grown) << "a small shrink stays in place";
  char* tiny = static_cast<char*>(do_realloc(shrunk, 100));
  EXPECT_FALSE(arena.Holds(tiny)) << "shrunk below the threshold: back to glibc";
  EXPECT_EQ(std::memcmp(tiny, pattern.data(), 100), 0);
  char* glibc = static_cast<char*>(do_realloc(tiny, 4 * kMinAlloc));
  EXPECT_FALSE(arena.Holds(glibc)) << "glibc's blocks stay glibc's";
  EXPECT_EQ(std::memcmp(glibc, pattern.data(), 100), 0);
  do_free(glibc);
  EXPECT_EQ(do_realloc(do_malloc(kMinAlloc), 0), nullptr);
  volatile size_t huge = size_t{1} << 62;
  void* array = reallocarray(nullptr, huge, 8);
  EXPECT_EQ(array, nullptr) << "count x size overflows";
  EXPECT_EQ(attn_pinned_heap_used_bytes(), used_before);
}

TEST(PinnedHeapTest, ManyThreadsKeepTheirBytes) {
  const size_t used_before = attn_pinned_heap_used_bytes();
  std::atomic<int> corrupted{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < 8; ++t) {
    threads.emplace_back([t, &corrupted] {
      std::mt19937 rng(t);
      std::vector<std::pair<unsigned char*, size_t>> live;
      for (int i = 0; i < 2000; ++i) {
        if (!live.empty() && (rng() % 2 == 0 || live.size() > 6)) {
          const size_t k = rng() % live.size();
          auto [p, n] = live[k];
          for (size_t j = 0; j < n; j += 4093) {
            if (p[j] != static_cast<unsigned char>(t * 31 + n)) corrupted.fetch_add(1);
          }
          do_free(p);
          live.erase(live.begin() + static_cast<std::ptrdiff_t>(k));
        } else {
          const size_t n =
              rng() % 2 == 0 ? 1 + rng() % 4096 : kMinAlloc + rng() % (size_t{2} << 20);
          auto* p = static_cast<unsigned char*>(do_malloc(n));
          std::memset(p, static_cast<unsigned char>(t * 31 + n), n);
          live.emplace_back(p, n);
        }
      }
      for (auto [p, n] : live) do_free(p);
    });
  }
  for (std::thread& t : threads) t.join();
  EXPECT_EQ(corrupted.load(), 0);
  EXPECT_EQ(attn_pinned_heap_used_bytes(), used_before);
}

}  // namespace
