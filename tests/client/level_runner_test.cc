// LevelRunner against the in-process fake service: both load modes stop by
// themselves, every request sent is accounted for, and bounds hold.
#include "level_runner.h"

#include <memory>
#include <string>
#include <vector>
#include <thread>

#include "absl/time/clock.h"
#include "attn/client/attention_client.h"
#include "fake_attention_service.h"
#include "gtest/gtest.h"
#include "level_summary.h"
#include "output_buffer_pool.h"

namespace attn::loadgen {
namespace {

class LevelRunnerTest : public ::testing::Test {
 protected:
  void SetUp() override {
    fake_ = attn::testing::StartFakeServer();
    ASSERT_NE(fake_, nullptr);
    for (int i = 0; i < 2; ++i) {
      ClientOptions options;
      options.address = fake_->address;
      options.dedicated_connection = true;
      absl::StatusOr<std::unique_ptr<AttentionClient>> client = AttentionClient::Connect(options);
      ASSERT_TRUE(client.ok()) << client.status();
      clients_.push_back(*std::move(client));
    }
    inputs_ = std::make_shared<const AttentionInputs>(
        MakeRandomInputs(kShape, DType::kBFloat16, 1));
  }

  std::vector<AttentionClient*> Clients() {
    return {clients_[0].get(), clients_[1].get()};
  }

  const Shape kShape{1, 32, 2, 16};
  std::unique_ptr<attn::testing::FakeServer> fake_;
  std::vector<std::unique_ptr<AttentionClient>> clients_;
  std::shared_ptr<const AttentionInputs> inputs_;
};

TEST_F(LevelRunnerTest, ClosedLoopStopsAtTheRequestBound) {
  LevelRunner runner(Clients(), inputs_, AttendOptions());
  LevelSpec spec;
  spec.concurrency = 4;
  spec.warmup = absl::ZeroDuration();
  spec.duration = absl::Seconds(60);  // the request bound ends the level
  spec.max_requests = 50;
  const LevelRun run = runner.Run(spec);
  const LevelSummary s = Summarize(run, kShape);
  EXPECT_EQ(s.sent, 50);
  EXPECT_EQ(s.completed, 50);
  EXPECT_EQ(s.failed, 0);
  EXPECT_EQ(run.warmup_requests, 0);
  EXPECT_EQ(fake_->service->unary_calls(), 50);
  EXPECT_LE(s.latency.p50_ms, s.latency.p90_ms);
  EXPECT_LE(s.latency.p90_ms, s.latency.p99_ms);
  EXPECT_LE(s.latency.p99_ms, s.latency.p999_ms);
  EXPECT_LE(s.latency.p999_ms, s.latency.max_ms);
  EXPECT_GT(s.throughput_rps, 0);
  ASSERT_TRUE(s.server_stats.available);
  for (const RequestRecord& r : run.records) {
    EXPECT_EQ(r.due_ns, r.sent_ns);  // closed loop: due when sent
    EXPECT_GE(r.done_ns, r.sent_ns);
    EXPECT_GE(r.sent_ns, run.window_start_ns);
  }
}

// With a pool, every request's O lands in one of at most `concurrency`
// reused buffers (each holding the same output a plain call returns), and
// results carry no output of their own.
TEST_F(LevelRunnerTest, OutputsGoIntoReusedBuffers) {
  absl::StatusOr<AttendResult> expected = clients_[0]->Attend(*inputs_);
  ASSERT_TRUE(expected.ok()) << expected.status();
  OutputBufferPool outputs(static_cast<size_t>(inputs_->QBytes()));
  LevelRunner runner(Clients(), inputs_, AttendOptions());
  runner.WriteOutputsInto(&outputs);
  LevelSpec spec;
  spec.concurrency = 4;
  spec.warmup = absl::ZeroDuration();
  spec.duration = absl::Seconds(60);  // the request bound ends the level
  spec.max_requests = 40;
  const LevelSummary s = Summarize(runner.Run(spec), kShape);
  EXPECT_EQ(s.completed, 40);
  EXPECT_GE(outputs.allocated(), 1);
  EXPECT_LE(outputs.allocated(), 4);
  std::vector<std::unique_ptr<char[]>> buffers;
  for (int i = 0; i < outputs.allocated(); ++i) buffers.push_back(outputs.Take());
  EXPECT_EQ(outputs.allocated(), static_cast<int>(buffers.size()))
      << "a buffer was not returned to the pool";
  for (const auto& buffer : buffers) {
    EXPECT_EQ(std::string(buffer.get(), outputs.bytes()), expected->out);
  }
}

TEST_F(LevelRunnerTest, WarmupRequestsAreNotRecorded) {
  LevelRunner runner(Clients(), inputs_, AttendOptions());
  LevelSpec spec;
  spec.concurrency = 2;
  spec.warmup = absl::Milliseconds(200);
  spec.duration = absl::Milliseconds(300);
  const LevelRun run = runner.Run(spec);
  EXPECT_GT(run.warmup_requests, 0);
  const LevelSummary s = Summarize(run, kShape);
  EXPECT_EQ(s.completed + s.failed, s.sent);
  EXPECT_EQ(fake_->service->unary_calls(), run.warmup_requests + s.sent);
  for (const RequestRecord& r : run.records) {
    EXPECT_GE(r.due_ns, run.window_start_ns);
    EXPECT_LT(r.due_ns, run.window_start_ns + 300'000'000);
  }
}

TEST_F(LevelRunnerTest, OpenLoopSendsOnScheduleAndCountsErrorsByCode) {
  AttendOptions call;
  call.kernel = "fail_invalid";  // every request fails, quickly
  LevelRunner runner(Clients(), inputs_, call);
  LevelSpec spec;
  spec.mode = LoadMode::kOpenLoop;
  spec.rate = 200;
  spec.arrivals = Arrivals::kConstant;
  spec.warmup = absl::ZeroDuration();
  spec.duration = absl::Milliseconds(500);
  const LevelRun run = runner.Run(spec);
  const LevelSummary s = Summarize(run, kShape);
  EXPECT_EQ(s.sent + s.unsent, 100);  // due at 0, 5, ..., 495 ms
  EXPECT_EQ(s.failed, s.sent);
  EXPECT_EQ(s.completed, 0);
  EXPECT_EQ(s.errors.at("INVALID_ARGUMENT"), s.sent);
  for (size_t i = 1; i < run.records.size(); ++i) {
    EXPECT_EQ(run.records[i].due_ns - run.records[i - 1].due_ns, 5'000'000);
    EXPECT_GE(run.records[i].sent_ns, run.records[i].due_ns);
  }
}

TEST_F(LevelRunnerTest, OpenLoopStopsWhenTheServerHoldsEveryRequest) {
  AttendOptions call;
  call.kernel = "hold";  // the fake holds each request until released below
  call.timeout = absl::Seconds(60);
  LevelRunner runner(Clients(), inputs_, call);
  LevelSpec spec;
  spec.mode = LoadMode::kOpenLoop;
  spec.rate = 10;
  spec.arrivals = Arrivals::kConstant;
  spec.warmup = absl::ZeroDuration();
  spec.duration = absl::Seconds(3);  // 30 due, at 0, 100, ..., 2900 ms
  spec.max_in_flight = 3;
  // The held requests end only once the window has closed.
  std::thread releaser([&] {
    const absl::Time give_up = absl::Now() + absl::Seconds(60);
    while (absl::Now() < give_up) {
      const LevelProgress p = runner.Progress();
      if (p.window_end_ns > 0 && p.elapsed_ns >= p.window_end_ns) break;
      absl::SleepFor(absl::Milliseconds(1));
    }
    fake_->service->ReleaseHeld();
  });
  const LevelRun run = runner.Run(spec);
  releaser.join();
  const LevelSummary s = Summarize(run, kShape);
  EXPECT_EQ(s.sent, 3);  // the cap; nothing else could be sent in the window
  EXPECT_EQ(s.unsent, 27);
  EXPECT_EQ(s.completed, 3);
}

// The window's starting stats are read before its first request is sent, so
// the server's counters over the level count every measured request however
// late that read is answered (the requests here take about a millisecond).
TEST(LevelRunnerStatsTest, StartingStatsPrecedeTheMeasuredRequests) {
  attn::testing::FakeAttentionService::Options fake_options;
  fake_options.get_stats_delay_ms = 300;
  auto fake = attn::testing::StartFakeServer(fake_options);
  ASSERT_NE(fake, nullptr);
  ClientOptions options;
  options.address = fake->address;
  absl::StatusOr<std::unique_ptr<AttentionClient>> client = AttentionClient::Connect(options);
  ASSERT_TRUE(client.ok()) << client.status();
  for (LoadMode mode : {LoadMode::kClosedLoop, LoadMode::kOpenLoop}) {
    SCOPED_TRACE(mode == LoadMode::kClosedLoop ? "closed loop" : "open loop");
    const int64_t before_level = fake->service->unary_calls();
    LevelRunner runner({client->get()},
                       std::make_shared<const AttentionInputs>(
                           MakeRandomInputs({1, 32, 2, 16}, DType::kBFloat16, 1)),
                       AttendOptions());
    LevelSpec spec;
    spec.mode = mode;
    spec.concurrency = 2;
    spec.rate = 1000;
    spec.warmup = absl::ZeroDuration();
    spec.duration = absl::Seconds(60);  // the request bound ends the level
    spec.max_requests = 10;
    const LevelRun run = runner.Run(spec);
    ASSERT_TRUE(run.stats_before.has_value());
    ASSERT_TRUE(run.stats_after.has_value());
    EXPECT_EQ(run.stats_before->requests_ok(), before_level);
    EXPECT_EQ(run.stats_after->requests_ok() - run.stats_before->requests_ok(), 10);
  }
}

}  // namespace
}  // namespace attn::loadgen
