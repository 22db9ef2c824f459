// FirstFitRanges (server/backends/first_fit_ranges.h): the pinned output
// pool's arena. Checked against a byte map of who holds what, through a
// random run of takes and returns.
#include "pinned_heap/first_fit_ranges.h"

#include <random>
#include <vector>

#include "gtest/gtest.h"

namespace attn::server {
namespace {

TEST(FirstFitRangesTest, TakesAlignedRangesLowestFirstAndRefusesWhatDoesNotFit) {
  FirstFitRanges ranges(10 * 4096 + 100, 4096);  // the tail past 40 KiB is unusable
  EXPECT_EQ(ranges.arena_bytes(), 10u * 4096);
  EXPECT_EQ(ranges.Take(1), std::optional<size_t>(0));
  EXPECT_EQ(ranges.Take(4097), std::optional<size_t>(4096));  // two pages
  EXPECT_EQ(ranges.Take(0), std::optional<size_t>(3 * 4096));  // empty takes a page too
  EXPECT_EQ(ranges.free_bytes(), 6u * 4096);
  EXPECT_EQ(ranges.Take(6 * 4096 + 1), std::nullopt);
  EXPECT_EQ(ranges.Take(6 * 4096), std::optional<size_t>(4 * 4096));
  EXPECT_EQ(ranges.Take(1), std::nullopt);
  EXPECT_EQ(ranges.free_bytes(), 0u);
}

TEST(FirstFitRangesTest, ReturnedNeighboursMergeIntoOneRange) {
  FirstFitRanges ranges(4 * 4096, 4096);
  const size_t a = *ranges.Take(4096), b = *ranges.Take(4096), c = *ranges.Take(4096);
  ranges.Return(a, 4096);
  ranges.Return(c, 4096);
  // Free: page 0, and pages 2-3 (c merged with the free last page).
  EXPECT_EQ(ranges.Take(3 * 4096), std::nullopt) << "page 1 is still lent";
  ranges.Return(b, 1);  // merges with both sides, and with the free last page
  EXPECT_EQ(ranges.free_bytes(), 4u * 4096);
  EXPECT_EQ(ranges.Take(4 * 4096), std::optional<size_t>(0));
}

TEST(FirstFitRangesTest, RandomTakesNeverOverlapAndEverythingComesBack) {
  constexpr size_t kPage = 256, kPages = 512;
  FirstFitRanges ranges(kPages * kPage, kPage);
  std::vector<int> owner(kPages, -1);
  struct Held {
    size_t offset, bytes;
  };
  std::vector<Held> held;
  std::mt19937 rng(7);
  int next_id = 0;
  for (int step = 0; step < 20000; ++step) {
    if (held.empty() || rng() % 2 == 0) {
      const size_t bytes = rng() % (kPage * 40);
      const std::optional<size_t> offset = ranges.Take(bytes);
      if (!offset.has_value()) continue;
      ASSERT_EQ(*offset % kPage, 0u);
      ASSERT_LE(*offset + ranges.Rounded(bytes), kPages * kPage);
      for (size_t p = *offset / kPage; p < (*offset + ranges.Rounded(bytes)) / kPage; ++p) {
        ASSERT_EQ(owner[p], -1) << "page " << p << " lent twice";
        owner[p] = next_id;
      }
      ++next_id;
      held.push_back({*offset, bytes});
    } else {
      const size_t i = rng() % held.size();
      for (size_t p = held[i].offset / kPage;
           p < (held[i].offset + ranges.Rounded(held[i].bytes)) / kPage; ++p) {
        owner[p] = -1;
      }
      ranges.Return(held[i].offset, held[i].bytes);
      held.erase(held.begin() + static_cast<long>(i));
    }
    size_t lent = 0;
    for (int o : owner) lent += o >= 0 ? kPage : 0;
    ASSERT_EQ(ranges.free_bytes(), kPages * kPage - lent);
  }
  for (const Held& h : held) ranges.Return(h.offset, h.bytes);
  EXPECT_EQ(ranges.Take(kPages * kPage), std::optional<size_t>(0)) << "free space stayed split";
}

}  // namespace
}  // namespace attn::server
