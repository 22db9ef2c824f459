// attn_cli attend's timing breakdown (client/cli/timing_table.h): the rows of
// one call, a split one included, add up to its round trip, and the kernel
// rate of a split call counts every shard's kernel time.
#include "timing_table.h"

#include <sstream>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "gtest/gtest.h"

namespace attn::cli {
namespace {

constexpr int64_t kMs = 1000000;

ServerTiming Shard(int64_t queue_ms, int64_t kernel_ms) {
  ServerTiming t;
  t.decode_ns = kMs / 10;
  t.queue_ns = queue_ms * kMs;
  t.kernel_ns = kernel_ms * kMs;
  t.total_ns = t.decode_ns + t.queue_ns + t.kernel_ns + kMs;  // 1 ms "other"
  return t;
}

// Three shards on a server that ran them in turn: the last to answer waited
// for the other two.
AttendResult SplitCall() {
  AttendResult r;
  r.shard_server = {Shard(0, 100), Shard(200, 100), Shard(100, 100)};
  r.last_shard = 1;
  r.server = r.shard_server[1];
  r.client.shards = 3;
  r.client.marshal_ns = 2 * kMs;
  r.client.unmarshal_ns = 3 * kMs;
  r.client.round_trip_ns = r.server.total_ns + 10 * kMs;
  return r;
}

// The "share" column of every row above the round trip, in percent.
double SumOfShares(const std::string& table) {
  double sum = 0;
  for (absl::string_view line : absl::StrSplit(table, '\n')) {
    if (absl::StrContains(line, "round trip") || !absl::EndsWith(line, "%")) continue;
    std::vector<absl::string_view> fields = absl::StrSplit(line, ' ', absl::SkipEmpty());
    double share = 0;
    EXPECT_TRUE(absl::SimpleAtod(absl::StripSuffix(fields.back(), "%"), &share)) << line;
    sum += share;
  }
  return sum;
}

TEST(TimingTableTest, ASplitCallsRowsAreItsLastShardsAndAddUpToTheRoundTrip) {
  const std::string table = FormatTimingTable({SplitCall()});
  EXPECT_NEAR(SumOfShares(table), 100.0, 0.3) << table;
  EXPECT_TRUE(absl::StrContains(table, "server queue          200.000")) << table;
  EXPECT_TRUE(absl::StrContains(table, "split into 3 shards")) << table;
  EXPECT_TRUE(absl::StrContains(table, "shard 2's, the last to answer")) << table;
  // min, max and sum over the shards
  EXPECT_TRUE(absl::StrContains(table, "server queue            0.000    200.000    300.000"))
      << table;
  EXPECT_TRUE(absl::StrContains(table, "server kernel         100.000    100.000    300.000"))
      << table;
}

TEST(TimingTableTest, AnUnsplitCallHasNoShardLines) {
  AttendResult r;
  r.server = Shard(5, 50);
  r.client.round_trip_ns = r.server.total_ns + kMs;
  const std::string table = FormatTimingTable({r});
  EXPECT_NEAR(SumOfShares(table), 100.0, 0.3) << table;
  EXPECT_FALSE(absl::StrContains(table, "shard")) << table;
  const std::string lines = FormatThroughput({r}, 1e9, 0);
  EXPECT_TRUE(absl::StrContains(lines, "0.020 TFLOP/s (1 GFLOP in 50.000 ms)\n")) << lines;
}

TEST(TimingTableTest, ASplitCallsKernelRateIsOverTheShardsSummedKernelTime) {
  // 3 GFLOP in 3 x 100 ms of kernel time: 0.010 TFLOP/s, not the 0.030 of
  // one shard's 100 ms.
  const std::string lines = FormatThroughput({SplitCall()}, 3e9, 1e6);
  EXPECT_TRUE(absl::StrContains(
      lines, "kernel:     0.010 TFLOP/s (3 GFLOP in 300.000 ms, the 3 shards' kernel time summed)"))
      << lines;
}

}  // namespace
}  // namespace attn::cli
