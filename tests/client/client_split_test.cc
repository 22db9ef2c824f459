// Large calls split over several connections (ClientOptions::
// split_calls_above_bytes): against the real CPU-backend attn_server, the
// reassembled output and LSE are bit-identical to the unsplit call's (and
// match the float64 reference) for batch, head and GQA head shards; against
// the in-process fake service, a failing shard, the deadline, and when a
// call is not split.
#include <atomic>
#include <chrono>
#include <cstring>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/match.h"
#include "absl/synchronization/notification.h"
#include "attn/client/attention_client.h"
#include "breadth_cases.h"
#include "call_split.h"
#include "fake_attention_service.h"
#include "gtest/gtest.h"
#include "server_process.h"

namespace attn {
namespace {

using ::attn::testing::ServerProcess;

std::unique_ptr<AttentionClient> ConnectOrDie(const std::string& address, int connections,
                                              int64_t split_above) {
  ClientOptions options;
  options.address = address;
  options.connections = connections;
  options.split_calls_above_bytes = split_above;
  absl::StatusOr<std::unique_ptr<AttentionClient>> client = AttentionClient::Connect(options);
  EXPECT_TRUE(client.ok()) << client.status();
  return client.ok() ? *std::move(client) : nullptr;
}

AttentionInputs Inputs(const Shape& shape, int64_t kv_num_heads = 0, int64_t kv_seq_len = 0,
                       uint64_t seed = 7) {
  AttentionInputs geometry;
  geometry.dtype = DType::kBFloat16;
  geometry.shape = shape;
  geometry.kv_num_heads = kv_num_heads;
  geometry.kv_seq_len = kv_seq_len;
  return MakeRandomInputs(geometry, seed);
}

// --- Planning (no server) ---------------------------------------------------

TEST(PlanShardsTest, BatchFirstThenKvHeadsInNearEqualRanges) {
  // Batch 4 gives as many shards as 4 heads: along the batch (no copy).
  std::vector<internal::Shard> plan = internal::PlanShards(Inputs({4, 8, 4, 16}), 8);
  ASSERT_EQ(plan.size(), 4u);
  for (int64_t i = 0; i < 4; ++i) {
    EXPECT_EQ(plan[i].batch_begin, i);
    EXPECT_EQ(plan[i].batch_end, i + 1);
    EXPECT_EQ(plan[i].kv_head_begin, 0);
    EXPECT_EQ(plan[i].kv_head_end, 4);
  }
  // Batch 2 but 6 KV heads: along the heads, 4 uneven ranges.
  plan = internal::PlanShards(Inputs({2, 8, 12, 16}, /*kv_num_heads=*/6), 4);
  ASSERT_EQ(plan.size(), 4u);
  const int64_t bounds[] = {0, 1, 3, 4, 6};
  for (size_t i = 0; i < 4; ++i) {
    EXPECT_EQ(plan[i].batch_begin, 0);
    EXPECT_EQ(plan[i].batch_end, 2);
    EXPECT_EQ(plan[i].kv_head_begin, bounds[i]);
    EXPECT_EQ(plan[i].kv_head_end, bounds[i + 1]);
  }
  // More shards asked for than there are heads or batch entries.
  EXPECT_EQ(internal::PlanShards(Inputs({1, 8, 2, 16}), 8).size(), 2u);
  EXPECT_EQ(internal::PlanShards(Inputs({1, 8, 4, 16}, /*kv_num_heads=*/1), 8).size(), 1u);
}

// A shard's output has its Q's layout, so scattering every shard's Q puts
// the whole Q back together; whatever pieces the shard's bytes arrive in.
TEST(ScatterOutputTest, ShardsInAnyPiecesScatterToTheWhole) {
  for (const Shape& shape : {Shape{2, 8, 12, 16}, Shape{4, 8, 4, 16}}) {
    auto whole = std::make_shared<const AttentionInputs>(
        Inputs(shape, /*kv_num_heads=*/shape.num_heads == 12 ? 6 : 0));
    for (size_t piece_bytes : {size_t{1}, size_t{3}, size_t{7}, size_t{1000}, size_t{1} << 20}) {
      std::string out(whole->QData().size(), '\0');
      for (const internal::Shard& shard : internal::PlanShards(*whole, 4)) {
        const std::shared_ptr<const AttentionInputs> part = internal::ShardInputs(whole, shard);
        const absl::string_view q = part->QData();
        std::vector<absl::string_view> pieces;
        for (size_t at = 0; at < q.size(); at += piece_bytes) {
          pieces.push_back(q.substr(at, piece_bytes));
        }
        internal::ScatterOutput(*whole, shard, pieces, out.data());
      }
      EXPECT_TRUE(out == whole->QData()) << shape.num_heads << " heads, pieces of " << piece_bytes;
    }
  }
}

TEST(PlanShardsTest, RegionsVarlenAndOptOutAreNotSplittable) {
  AttentionInputs in = Inputs({2, 8, 2, 16});
  AttendOptions options;
  EXPECT_TRUE(internal::SplittableCall(in, options));
  options.allow_split = false;
  EXPECT_FALSE(internal::SplittableCall(in, options));
  options = AttendOptions();
  options.out_ref.region_id = "r";
  EXPECT_FALSE(internal::SplittableCall(in, options));
  AttentionInputs varlen = in;
  varlen.cu_seqlens_q = {0, 8, 16};
  varlen.cu_seqlens_k = {0, 8, 16};
  EXPECT_FALSE(internal::SplittableCall(varlen, AttendOptions()));
}

TEST(SplitClientOptionsTest, NegativeThresholdIsRefusedNamingTheOption) {
  ClientOptions options;
  options.address = "127.0.0.1:1";
  options.split_calls_above_bytes = -1;
  absl::StatusOr<std::unique_ptr<AttentionClient>> client = AttentionClient::Connect(options);
  ASSERT_FALSE(client.ok());
  EXPECT_EQ(client.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_TRUE(absl::StrContains(client.status().message(), "split_calls_above_bytes"))
      << client.status();
}

// --- Against the real CPU-backend server ------------------------------------

class SplitE2eTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    // Calls are split only for a server with two or more workers.
    absl::StatusOr<std::unique_ptr<ServerProcess>> server =
        ServerProcess::Start({"--backend=cpu", "--cpu_threads=1", "--cpu_workers=2"});
    ASSERT_TRUE(server.ok()) << server.status();
    server_ = server->release();
  }
  static void TearDownTestSuite() {
    delete server_;
    server_ = nullptr;
  }
  void SetUp() override {
    ASSERT_NE(server_, nullptr);
    whole_ = ConnectOrDie(server_->address(), 8, /*split_above=*/0);
    ASSERT_NE(whole_, nullptr);
  }

  // Runs `in` split over `connections` connections and unsplit, and expects
  // `shards` shards, the same bytes, and the float64 reference's values.
  void ExpectSplitMatchesUnsplit(const AttentionInputs& in, const AttendOptions& options,
                                 int connections, int shards) {
    std::unique_ptr<AttentionClient> split = ConnectOrDie(server_->address(), connections, 1);
    ASSERT_NE(split, nullptr);
    absl::StatusOr<AttendResult> reference = whole_->Attend(in, options);
    ASSERT_TRUE(reference.ok()) << reference.status();
    EXPECT_EQ(reference->client.shards, 1);
    absl::StatusOr<AttendResult> result = split->Attend(in, options);
    ASSERT_TRUE(result.ok()) << result.status();
    EXPECT_EQ(result->client.shards, shards);
    EXPECT_FALSE(result->client.streamed);
    EXPECT_EQ(result->shape, in.shape);
    EXPECT_TRUE(result->out == reference->out) << "split output differs from the unsplit call's";
    // Bit for bit (an LSE of -inf too); no LSE at all without return_lse.
    ASSERT_EQ(result->lse.size(), reference->lse.size());
    EXPECT_TRUE(result->lse.empty() ||
                std::memcmp(result->lse.data(), reference->lse.data(),
                            result->lse.size() * sizeof(float)) == 0)
        << "split LSE differs from the unsplit call's";
    attn::testing::ExpectMatchesReference(in, options, result->out, result->lse);
    EXPECT_EQ(result->kernel, "cpu_flash");
    EXPECT_GT(result->server.kernel_ns, 0);
    EXPECT_GE(result->server.total_ns, result->server.kernel_ns);
    EXPECT_GE(result->client.round_trip_ns, result->server.total_ns);
    EXPECT_GT(result->kernel_tflops, 0.0);
    ExpectSplitTimingAddsUp(in, options, *result, shards);

    // O into the caller's own (poisoned) buffer instead of AttendResult::out,
    // split and unsplit: the same bytes, nothing left in the result.
    for (AttentionClient* client : {split.get(), whole_.get()}) {
      std::string destination(reference->out.size(), '\xAB');
      AttendOptions into = options;
      into.out_destination = destination.data();
      absl::StatusOr<AttendResult> placed = client->Attend(in, into);
      ASSERT_TRUE(placed.ok()) << placed.status();
      EXPECT_EQ(placed->client.shards, client == split.get() ? shards : 1);
      EXPECT_TRUE(placed->out.empty());
      EXPECT_EQ(destination, reference->out) << "out_destination got other bytes";
      ASSERT_EQ(placed->lse.size(), reference->lse.size());
    }
  }

  // A split call's figures are its last shard's, so they partition the
  // round trip as an unsplit call's do, and its kernel rate is the whole
  // problem's FLOPs over every shard's kernel time.
  static void ExpectSplitTimingAddsUp(const AttentionInputs& in, const AttendOptions& options,
                                      const AttendResult& result, int shards) {
    ASSERT_EQ(result.shard_server.size(), static_cast<size_t>(shards));
    ASSERT_GE(result.last_shard, 0);
    ASSERT_LT(result.last_shard, shards);
    const ServerTiming& last = result.shard_server[static_cast<size_t>(result.last_shard)];
    EXPECT_EQ(result.server.total_ns, last.total_ns);
    EXPECT_EQ(result.server.queue_ns, last.queue_ns);
    EXPECT_EQ(result.server.kernel_ns, last.kernel_ns);
    const ClientTiming& c = result.client;
    EXPECT_GT(c.marshal_ns, 0);
    EXPECT_GT(c.unmarshal_ns, 0);
    // Not clamped: network + gRPC is what is left, and something is.
    EXPECT_GT(c.round_trip_ns - c.marshal_ns - c.unmarshal_ns - result.server.total_ns, 0);
    int64_t kernel_sum = 0;
    for (const ServerTiming& shard : result.shard_server) {
      EXPECT_GT(shard.kernel_ns, 0);
      EXPECT_LE(shard.kernel_ns, shard.total_ns);
      kernel_sum += shard.kernel_ns;
    }
    EXPECT_EQ(result.SummedKernelNs(), kernel_sum);
    EXPECT_NEAR(result.kernel_tflops,
                in.Flops(options) / static_cast<double>(kernel_sum) * 1e-3,
                result.kernel_tflops * 1e-9);
  }

  static ServerProcess* server_;
  std::unique_ptr<AttentionClient> whole_;
};

ServerProcess* SplitE2eTest::server_ = nullptr;

TEST_F(SplitE2eTest, BatchShardsAreBitIdentical) {
  ExpectSplitMatchesUnsplit(Inputs({4, 40, 2, 32}), AttendOptions(), 8, 4);
}

TEST_F(SplitE2eTest, HeadShardsAreBitIdentical) {
  // 6 heads over 4 connections: uneven ranges; batch 2, so each shard is a
  // strided gather over both batch entries.
  ExpectSplitMatchesUnsplit(Inputs({2, 40, 6, 32}), AttendOptions(), 4, 4);
}

TEST_F(SplitE2eTest, GqaHeadShardsCausalWithLseAreBitIdentical) {
  AttendOptions options;
  options.causal = true;
  options.return_lse = true;
  // 4 KV heads (2 query heads each) over 3 connections, kv_seq_len 50 > 31.
  ExpectSplitMatchesUnsplit(Inputs({1, 31, 8, 32}, /*kv_num_heads=*/4, /*kv_seq_len=*/50),
                            options, 3, 3);
}

TEST_F(SplitE2eTest, BatchShardsWithWindowAndLseAreBitIdentical) {
  AttendOptions options;
  options.window_left = 5;
  options.window_right = 2;
  options.return_lse = true;
  options.softmax_scale = 0.3f;
  ExpectSplitMatchesUnsplit(Inputs({3, 33, 4, 16}, /*kv_num_heads=*/2), options, 8, 3);
}

TEST_F(SplitE2eTest, MoreConnectionsThanHeadsGivesOneShardPerHead) {
  ExpectSplitMatchesUnsplit(Inputs({1, 40, 2, 32}), AttendOptions(), 8, 2);
}

TEST_F(SplitE2eTest, EachShardIsOneServerRequest) {
  std::unique_ptr<AttentionClient> split = ConnectOrDie(server_->address(), 8, 1);
  ASSERT_NE(split, nullptr);
  absl::StatusOr<attnserve::v1::ServerStats> before = split->GetStats();
  ASSERT_TRUE(before.ok()) << before.status();
  absl::StatusOr<AttendResult> result = split->Attend(Inputs({1, 16, 5, 16}));
  ASSERT_TRUE(result.ok()) << result.status();
  EXPECT_EQ(result->client.shards, 5);
  absl::StatusOr<attnserve::v1::ServerStats> after = split->GetStats();
  ASSERT_TRUE(after.ok()) << after.status();
  EXPECT_EQ(after->requests_ok() - before->requests_ok(), 5);
}

TEST(SplitWorkersTest, AOneWorkerServerGetsWholeCallsAndATwoWorkerOneShardsPerConnection) {
  const AttentionInputs in = Inputs({4, 16, 4, 16});
  {
    absl::StatusOr<std::unique_ptr<ServerProcess>> one =
        ServerProcess::Start({"--backend=cpu", "--cpu_threads=1"});  // --cpu_workers=1
    ASSERT_TRUE(one.ok()) << one.status();
    std::unique_ptr<AttentionClient> client = ConnectOrDie((*one)->address(), 8, 1);
    ASSERT_NE(client, nullptr);
    ASSERT_TRUE(client->server_info().has_value());
    EXPECT_EQ(client->server_info()->limits().workers(), 1);
    absl::StatusOr<AttendResult> result = client->Attend(in);
    ASSERT_TRUE(result.ok()) << result.status();
    EXPECT_EQ(result->client.shards, 1);
    EXPECT_TRUE(result->shard_server.empty());
    EXPECT_EQ(result->SummedKernelNs(), result->server.kernel_ns);
  }
  attn::testing::FakeAttentionService::Options two;
  two.workers = 2;
  std::unique_ptr<attn::testing::FakeServer> fake = attn::testing::StartFakeServer(two);
  std::unique_ptr<AttentionClient> client = ConnectOrDie(fake->address, 8, 1);
  ASSERT_NE(client, nullptr);
  const int64_t calls_before = fake->service->unary_calls();
  std::unique_ptr<AttentionClient> three = ConnectOrDie(fake->address, 3, 1);
  ASSERT_NE(three, nullptr);
  // Up to the connections (and the batch of 4), not the workers.
  absl::StatusOr<AttendResult> result = client->Attend(in);
  ASSERT_TRUE(result.ok()) << result.status();
  EXPECT_EQ(result->client.shards, 4);
  result = three->Attend(in);
  ASSERT_TRUE(result.ok()) << result.status();
  EXPECT_EQ(result->client.shards, 3);
  EXPECT_EQ(fake->service->unary_calls() - calls_before, 7);
}

TEST_F(SplitE2eTest, ServerRefusalOfEveryShardIsOneClearStatus) {
  std::unique_ptr<AttentionClient> split = ConnectOrDie(server_->address(), 4, 1);
  ASSERT_NE(split, nullptr);
  AttendOptions options;
  options.window_left = -2;  // the server names the field
  absl::StatusOr<AttendResult> result = split->Attend(Inputs({4, 16, 2, 16}), options);
  ASSERT_FALSE(result.ok());
  EXPECT_EQ(result.status().code(), absl::StatusCode::kInvalidArgument) << result.status();
  EXPECT_TRUE(absl::StrContains(result.status().message(), "window_left")) << result.status();
  EXPECT_TRUE(absl::StrContains(result.status().message(), "of 4")) << result.status();
}

TEST_F(SplitE2eTest, ConcurrentSplitCallsFromManyThreadsAreBitIdentical) {
  std::unique_ptr<AttentionClient> split = ConnectOrDie(server_->address(), 8, 1);
  ASSERT_NE(split, nullptr);
  const AttentionInputs in = Inputs({2, 24, 4, 16}, /*kv_num_heads=*/2, 0, 11);
  absl::StatusOr<AttendResult> reference = whole_->Attend(in);
  ASSERT_TRUE(reference.ok()) << reference.status();
  std::atomic<int> mismatches{0}, failures{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&] {
      for (int i = 0; i < 5; ++i) {
        absl::StatusOr<AttendResult> r = split->Attend(in);
        if (!r.ok()) {
          ++failures;
          continue;
        }
        if (r->out != reference->out) ++mismatches;
      }
    });
  }
  for (std::thread& t : threads) t.join();
  EXPECT_EQ(failures.load(), 0);
  EXPECT_EQ(mismatches.load(), 0);
}

// --- Against the fake service: failures, deadline, when not to split -------

class SplitFakeTest : public ::testing::Test {
 protected:
  void SetUp() override { fake_ = attn::testing::StartFakeServer(); }
  std::unique_ptr<attn::testing::FakeServer> fake_;
};

TEST_F(SplitFakeTest, FirstFailingShardCancelsTheRestAndIsWhatTheCallerGets) {
  std::unique_ptr<AttentionClient> client = ConnectOrDie(fake_->address, 4, 1);
  ASSERT_NE(client, nullptr);
  AttendOptions options;
  options.kernel = "fail_first";  // one shard refused, the others held until cancelled
  options.timeout = absl::Seconds(60);
  const auto start = std::chrono::steady_clock::now();
  absl::StatusOr<AttendResult> result = client->Attend(Inputs({4, 8, 2, 16}), options);
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  ASSERT_FALSE(result.ok());
  EXPECT_EQ(result.status().code(), absl::StatusCode::kInvalidArgument) << result.status();
  EXPECT_TRUE(absl::StrContains(result.status().message(), "fail_first refuses"))
      << result.status();
  EXPECT_TRUE(absl::StrContains(result.status().message(), "of 4")) << result.status();
  // The held shards end when cancelled, not when the fake gives up (30 s).
  EXPECT_LT(seconds, 20.0);
}

TEST_F(SplitFakeTest, TheCallersDeadlineAppliesToEveryShard) {
  std::unique_ptr<AttentionClient> client = ConnectOrDie(fake_->address, 4, 1);
  ASSERT_NE(client, nullptr);
  AttendOptions options;
  options.kernel = "wait_cancel";
  options.timeout = absl::Milliseconds(300);
  const auto start = std::chrono::steady_clock::now();
  absl::StatusOr<AttendResult> result = client->Attend(Inputs({4, 8, 2, 16}), options);
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  ASSERT_FALSE(result.ok());
  EXPECT_EQ(result.status().code(), absl::StatusCode::kDeadlineExceeded) << result.status();
  EXPECT_GE(seconds, 0.25);
  EXPECT_LT(seconds, 20.0);
}

TEST_F(SplitFakeTest, CallsAtOrBelowTheThresholdOrOptedOutAreNotSplit) {
  const AttentionInputs in = Inputs({4, 8, 2, 16});
  std::unique_ptr<AttentionClient> at = ConnectOrDie(fake_->address, 4, in.InputBytes());
  std::unique_ptr<AttentionClient> below = ConnectOrDie(fake_->address, 4, in.InputBytes() - 1);
  std::unique_ptr<AttentionClient> never = ConnectOrDie(fake_->address, 4, 0);
  ASSERT_TRUE(at && below && never);
  struct Case {
    AttentionClient* client;
    bool allow_split;
    int shards;
  } cases[] = {{at.get(), true, 1}, {never.get(), true, 1}, {below.get(), false, 1},
               {below.get(), true, 4}};
  for (const Case& c : cases) {
    AttendOptions options;
    options.allow_split = c.allow_split;
    const int64_t calls_before = fake_->service->unary_calls();
    absl::StatusOr<AttendResult> result = c.client->Attend(in, options);
    ASSERT_TRUE(result.ok()) << result.status();
    EXPECT_EQ(result->client.shards, c.shards);
    EXPECT_EQ(fake_->service->unary_calls() - calls_before, c.shards);
  }
}

TEST_F(SplitFakeTest, CallsWithoutTwoIdleConnectionsAreNotSplit) {
  std::unique_ptr<AttentionClient> client = ConnectOrDie(fake_->address, 2, 1);
  ASSERT_NE(client, nullptr);
  // One call in flight (held by the fake) leaves one idle connection.
  AttendOptions hold;
  hold.kernel = "hold";
  hold.allow_split = false;
  absl::Notification held_done;
  client->AttendAsync(std::make_shared<const AttentionInputs>(Inputs({1, 4, 1, 16})), hold,
                      [&held_done](absl::StatusOr<AttendResult> r) {
                        EXPECT_TRUE(r.ok()) << r.status();
                        held_done.Notify();
                      });
  const AttentionInputs in = Inputs({2, 8, 2, 16});
  absl::StatusOr<AttendResult> busy = client->Attend(in);
  ASSERT_TRUE(busy.ok()) << busy.status();
  EXPECT_EQ(busy->client.shards, 1);
  fake_->service->ReleaseHeld();
  held_done.WaitForNotification();
  absl::StatusOr<AttendResult> idle = client->Attend(in);
  ASSERT_TRUE(idle.ok()) << idle.status();
  EXPECT_EQ(idle->client.shards, 2);
  EXPECT_EQ(idle->out, busy->out);
}

TEST_F(SplitFakeTest, StreamedCallsAreNotSplit) {
  std::unique_ptr<AttentionClient> client = ConnectOrDie(fake_->address, 4, 1);
  ASSERT_NE(client, nullptr);
  AttendOptions options;
  options.transport = Transport::kStream;
  absl::StatusOr<AttendResult> result = client->Attend(Inputs({4, 8, 2, 16}), options);
  ASSERT_TRUE(result.ok()) << result.status();
  EXPECT_TRUE(result->client.streamed);
  EXPECT_EQ(result->client.shards, 1);

  // A streamed output goes to out_destination too.
  std::string destination(result->out.size(), '\xAB');
  options.out_destination = destination.data();
  absl::StatusOr<AttendResult> placed = client->Attend(Inputs({4, 8, 2, 16}), options);
  ASSERT_TRUE(placed.ok()) << placed.status();
  EXPECT_TRUE(placed->client.streamed);
  EXPECT_TRUE(placed->out.empty());
  EXPECT_EQ(destination, result->out);
}

}  // namespace
}  // namespace attn
