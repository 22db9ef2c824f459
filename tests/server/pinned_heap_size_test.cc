// --pinned_heap_bytes resolved (server/backends/pinned_heap_size.h): auto is
// the admitted-bytes budget where the backend uses the heap, capped at a
// quarter of the host's memory, and off elsewhere; an explicit size beyond
// half the host's memory is refused naming the flag; the host's memory is
// read at all.
#include "backends/pinned_heap_size.h"

#include "absl/strings/match.h"
#include "gtest/gtest.h"

namespace attn::server {
namespace {

constexpr int64_t kGiB = int64_t{1} << 30;

TEST(PinnedHeapSizeTest, AutoIsTheAdmittedBudgetCappedByHostMemory) {
  EXPECT_EQ(*ResolvePinnedHeapBytes(-1, 2 * kGiB, true, 64 * kGiB), 2 * kGiB);
  EXPECT_EQ(*ResolvePinnedHeapBytes(-1, 8 * kGiB, true, 16 * kGiB), 4 * kGiB) << "a quarter";
  EXPECT_EQ(*ResolvePinnedHeapBytes(-1, 8 * kGiB, true, std::nullopt), 8 * kGiB);
  EXPECT_EQ(*ResolvePinnedHeapBytes(-1, 8 * kGiB, false, 64 * kGiB), 0) << "off on cpu";
}

TEST(PinnedHeapSizeTest, ExplicitSizesUpToHalfTheHostAndZeroIsOff) {
  EXPECT_EQ(*ResolvePinnedHeapBytes(0, 8 * kGiB, true, 64 * kGiB), 0);
  EXPECT_EQ(*ResolvePinnedHeapBytes(3 * kGiB, 8 * kGiB, false, 64 * kGiB), 3 * kGiB);
  EXPECT_EQ(*ResolvePinnedHeapBytes(32 * kGiB, 8 * kGiB, true, 64 * kGiB), 32 * kGiB);
  const absl::StatusOr<int64_t> too_large =
      ResolvePinnedHeapBytes(32 * kGiB + 1, 8 * kGiB, true, 64 * kGiB);
  ASSERT_EQ(too_large.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_TRUE(absl::StrContains(too_large.status().message(), "--pinned_heap_bytes=34359738369"))
      << too_large.status();
  EXPECT_TRUE(absl::StrContains(too_large.status().message(), "68719476736")) << too_large.status();
  EXPECT_EQ(*ResolvePinnedHeapBytes(int64_t{1} << 44, 0, true, std::nullopt), int64_t{1} << 44)
      << "an unknown host bounds nothing";
}

TEST(PinnedHeapSizeTest, HostMemoryIsReadHere) {
  const std::optional<int64_t> host = HostMemoryBytes();
  ASSERT_TRUE(host.has_value());
  EXPECT_GT(*host, int64_t{64} << 20);
}

}  // namespace
}  // namespace attn::server
