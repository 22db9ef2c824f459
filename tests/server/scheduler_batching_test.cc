// Request batching in the scheduler (scheduling/scheduler.h, BatchPolicy),
// with a fake executor that records each launch's jobs and blocks until the
// test opens its gate, so every queue state is reached deterministically:
// jobs are queued while the worker is held, and waits end by a job filling
// the batch, a deadline, or Stop() (never by guessing how long a wait is).
#include <atomic>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/synchronization/mutex.h"
#include "absl/time/clock.h"
#include "attn/problem.h"
#include "gtest/gtest.h"
#include "core/batch_key.h"
#include "scheduling/scheduler.h"

namespace attn::server {
namespace {

// Bytes of Q (the larger tensor) of one job of Shape(seq): 1 x seq x 1 x 8
// bf16 elements.
int64_t JobBytes(int64_t seq) { return seq * 8 * 2; }

class BatchingFake : public Executor {
 public:
  explicit BatchingFake(int64_t capacity) : capacity_(capacity) {}

  std::vector<absl::Status> Run(absl::Span<Job* const> jobs) override {
    Launch(std::vector<Job*>(jobs.begin(), jobs.end()));
    if (jobs.size() > 1) {
      for (Job* job : jobs) job->times.batch_size = static_cast<int64_t>(jobs.size());
    }
    return std::vector<absl::Status>(jobs.size(), absl::OkStatus());
  }
  int64_t BatchCapacityBytes() const override { return capacity_; }
  std::string Name() const override { return "batching fake"; }

  void Open() {
    absl::MutexLock lock(&mu_);
    open_ = true;
  }
  std::vector<std::vector<std::string>> launches() {
    absl::MutexLock lock(&mu_);
    return launches_;
  }

 private:
  void Launch(const std::vector<Job*>& jobs) {
    absl::MutexLock lock(&mu_);
    std::vector<std::string> ids;
    for (const Job* job : jobs) ids.push_back(job->spec.request_id);
    launches_.push_back(ids);
    mu_.Await(absl::Condition(&open_));
  }

  const int64_t capacity_;
  absl::Mutex mu_;
  bool open_ = false;
  std::vector<std::vector<std::string>> launches_;
};

using Launches = std::vector<std::vector<std::string>>;

class SchedulerBatchingTest : public ::testing::Test {
 protected:
  void Make(BatchPolicy policy, int64_t capacity = INT64_MAX) {
    auto fake = std::make_unique<BatchingFake>(capacity);
    fake_ = fake.get();
    std::vector<std::unique_ptr<Executor>> executors;
    executors.push_back(std::move(fake));
    scheduler_ = std::make_unique<Scheduler>(std::move(executors), 64, nullptr, policy);
  }

  // A stackable job of [1, seq, 1, 8] (same seq: same batch key), or, with
  // `varlen`, one that is never stacked.
  absl::Status Submit(const std::string& id, int64_t seq = 16,
                      absl::Time deadline = absl::InfiniteFuture(), bool varlen = false) {
    auto job = std::make_unique<Job>();
    job->spec.request_id = id;
    job->spec.dtype = DType::kBFloat16;
    job->spec.problem = AttentionProblem::SelfAttention(1, seq, 1, 8);
    job->spec.problem.varlen = varlen;
    // Compared by address only; the fake never runs it.
    job->spec.kernel = reinterpret_cast<const KernelHandle*>(&kernel_tag_);
    job->out = TensorDestination::Host(&outs_[id]);
    job->deadline = deadline;
    job->cancelled = &cancelled_[id];
    job->done = [this](std::unique_ptr<Job> j, absl::Status s) {
      absl::MutexLock lock(&mu_);
      statuses_[j->spec.request_id] = s;
      batch_sizes_[j->spec.request_id] = j->times.batch_size;
    };
    return scheduler_->Submit(job);
  }

  void WaitForLoad(int64_t running, int64_t queued) {
    const absl::Time deadline = absl::Now() + absl::Seconds(30);
    while (absl::Now() < deadline) {
      const Scheduler::Load load = scheduler_->load();
      if (load.running == running && load.queued == queued) return;
      absl::SleepFor(absl::Milliseconds(1));
    }
    FAIL() << "scheduler never reached running=" << running << " queued=" << queued;
  }

  void WaitForCompletions(size_t n) {
    absl::MutexLock lock(&mu_);
    wanted_ = n;
    ASSERT_TRUE(mu_.AwaitWithTimeout(absl::Condition(this, &SchedulerBatchingTest::Enough),
                                     absl::Seconds(30)))
        << statuses_.size() << " of " << n << " completed";
  }
  bool Enough() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return statuses_.size() >= wanted_; }

  absl::Status StatusOf(const std::string& id) {
    absl::MutexLock lock(&mu_);
    auto it = statuses_.find(id);
    return it == statuses_.end() ? absl::UnknownError("not completed: " + id) : it->second;
  }
  int64_t BatchSizeOf(const std::string& id) {
    absl::MutexLock lock(&mu_);
    return batch_sizes_[id];
  }

  void TearDown() override {
    if (scheduler_ == nullptr) return;
    fake_->Open();
    scheduler_.reset();
  }

  const char kernel_tag_ = 0;
  std::map<std::string, std::string> outs_;
  std::map<std::string, std::atomic<bool>> cancelled_;
  absl::Mutex mu_;
  std::map<std::string, absl::Status> statuses_;
  std::map<std::string, int64_t> batch_sizes_;
  size_t wanted_ = 0;
  BatchingFake* fake_ = nullptr;
  std::unique_ptr<Scheduler> scheduler_;
};

constexpr absl::Duration kForever = absl::Hours(1);  // a wait only a full batch or Stop ends

TEST_F(SchedulerBatchingTest, CompatibleJobsShareALaunchOthersKeepTheirOrder) {
  Make(BatchPolicy{kForever, 4});
  // Held in the executor while the rest queue (varlen: never batched).
  ASSERT_TRUE(Submit("blocker", 16, absl::InfiniteFuture(), /*varlen=*/true).ok());
  WaitForLoad(1, 0);
  for (const char* id : {"a1", "x1", "a2", "a3", "x2", "a4", "a5"}) {
    ASSERT_TRUE(Submit(id, id[0] == 'a' ? 16 : 32).ok());
  }
  fake_->Open();
  // a1 gathers a2..a4 (max 4) past x1; then x1 gathers x2 and waits (the
  // batch is short of 4) until Stop; a5 last.
  WaitForLoad(2, 1);
  scheduler_->Stop();
  WaitForCompletions(8);
  EXPECT_EQ(fake_->launches(),
            (Launches{{"blocker"}, {"a1", "a2", "a3", "a4"}, {"x1", "x2"}, {"a5"}}));
  for (const char* id : {"a1", "a2", "a3", "a4"}) EXPECT_EQ(BatchSizeOf(id), 4) << id;
  EXPECT_EQ(BatchSizeOf("a5"), 0) << "a job that ran alone reports no batch";
  for (const auto* id : {"blocker", "a1", "x1", "a2", "a3", "x2", "a4", "a5"}) {
    EXPECT_TRUE(StatusOf(id).ok()) << id << ": " << StatusOf(id);
  }
  const Scheduler::Load load = scheduler_->load();
  EXPECT_EQ(load.batched_launches, 2);
  EXPECT_EQ(load.batched_requests, 6);
}

TEST_F(SchedulerBatchingTest, WaitsForLateArrivalsUntilTheBatchIsFull) {
  Make(BatchPolicy{kForever, 3});
  fake_->Open();
  ASSERT_TRUE(Submit("a1").ok());
  WaitForLoad(1, 0);  // the worker holds a1 and waits for more
  ASSERT_TRUE(Submit("a2").ok());
  WaitForLoad(2, 0);
  ASSERT_TRUE(Submit("a3").ok());  // fills the batch: it runs at once
  WaitForCompletions(3);
  EXPECT_EQ(fake_->launches(), (Launches{{"a1", "a2", "a3"}}));
}

TEST_F(SchedulerBatchingTest, TheDelayBoundsTheWait) {
  const absl::Duration delay = absl::Milliseconds(50);
  Make(BatchPolicy{delay, 8});
  fake_->Open();
  const absl::Time submitted = absl::Now();
  ASSERT_TRUE(Submit("a1").ok());
  WaitForCompletions(1);  // no second job ever comes: only the delay ends the wait
  EXPECT_GE(absl::Now() - submitted, delay);
  EXPECT_EQ(fake_->launches(), (Launches{{"a1"}}));
}

TEST_F(SchedulerBatchingTest, NeverWaitsPastAJobsDeadlineAndDoesNotRunItAfter) {
  Make(BatchPolicy{kForever, 8});
  fake_->Open();
  ASSERT_TRUE(Submit("patient").ok());
  WaitForLoad(1, 0);  // the worker holds patient and waits for more
  // Gathered at once; only a stall of the margin before that could leave it
  // queued instead (the scheduler tests' deadline margin).
  ASSERT_TRUE(Submit("late", 16, absl::Now() + absl::Seconds(2)).ok());
  // Only late's deadline ends the wait: late is not run, patient runs alone.
  WaitForCompletions(2);
  EXPECT_EQ(StatusOf("late").code(), absl::StatusCode::kDeadlineExceeded) << StatusOf("late");
  EXPECT_TRUE(StatusOf("patient").ok()) << StatusOf("patient");
  EXPECT_EQ(fake_->launches(), (Launches{{"patient"}}));
}

TEST_F(SchedulerBatchingTest, AJobCancelledWhileGatheredIsNotRun) {
  Make(BatchPolicy{kForever, 3});
  fake_->Open();
  ASSERT_TRUE(Submit("a1").ok());
  ASSERT_TRUE(Submit("a2").ok());
  WaitForLoad(2, 0);  // both gathered, waiting for a third
  cancelled_["a2"] = true;
  ASSERT_TRUE(Submit("a3").ok());
  WaitForCompletions(3);
  EXPECT_EQ(StatusOf("a2").code(), absl::StatusCode::kCancelled) << StatusOf("a2");
  EXPECT_EQ(fake_->launches(), (Launches{{"a1", "a3"}}));
}

TEST_F(SchedulerBatchingTest, TheExecutorsCapacityBoundsABatch) {
  Make(BatchPolicy{kForever, 8}, /*capacity=*/2 * JobBytes(16));
  ASSERT_TRUE(Submit("blocker", 16, absl::InfiniteFuture(), /*varlen=*/true).ok());
  WaitForLoad(1, 0);
  for (const char* id : {"a1", "a2", "a3"}) ASSERT_TRUE(Submit(id).ok());
  fake_->Open();
  WaitForLoad(2, 1);  // a1 and a2 fill the capacity; a3 stays queued
  scheduler_->Stop();  // ends the wait: what was gathered runs, then a3
  WaitForCompletions(4);
  EXPECT_EQ(fake_->launches(), (Launches{{"blocker"}, {"a1", "a2"}, {"a3"}}));
  EXPECT_EQ(Submit("after").code(), absl::StatusCode::kUnavailable);
}

TEST_F(SchedulerBatchingTest, ZeroDelayRunsEveryJobAlone) {
  Make(BatchPolicy{absl::ZeroDuration(), 8});
  ASSERT_TRUE(Submit("blocker").ok());
  WaitForLoad(1, 0);
  for (const char* id : {"a1", "a2"}) ASSERT_TRUE(Submit(id).ok());
  fake_->Open();
  WaitForCompletions(3);
  EXPECT_EQ(fake_->launches(), (Launches{{"blocker"}, {"a1"}, {"a2"}}));
  EXPECT_EQ(scheduler_->load().batched_launches, 0);
}

TEST_F(SchedulerBatchingTest, AnExecutorThatCannotBatchRunsEveryJobAlone) {
  Make(BatchPolicy{kForever, 8}, /*capacity=*/0);
  ASSERT_TRUE(Submit("blocker").ok());
  WaitForLoad(1, 0);
  for (const char* id : {"a1", "a2"}) ASSERT_TRUE(Submit(id).ok());
  fake_->Open();
  WaitForCompletions(3);
  EXPECT_EQ(fake_->launches(), (Launches{{"blocker"}, {"a1"}, {"a2"}}));
}

TEST(BatchKeyTest, OnlyDenseRequestsWithOneKeyStack) {
  const char tag = 0;
  std::string out;
  Job a;
  a.spec.problem = AttentionProblem::SelfAttention(2, 16, 4, 64);
  a.spec.kernel = reinterpret_cast<const KernelHandle*>(&tag);
  a.out = TensorDestination::Host(&out);
  EXPECT_TRUE(Stackable(a));
  Job b;
  b.spec = a.spec;
  b.spec.problem.batch = 5;
  EXPECT_TRUE(SameBatchKey(a.spec, b.spec)) << "batch is not part of the key";
  for (auto change : std::vector<void (*)(RequestSpec*)>{
           [](RequestSpec* s) { s->problem.seqlen_k = 32; },
           [](RequestSpec* s) { s->problem.causal = true; },
           [](RequestSpec* s) { s->problem.window_left = 4; },
           [](RequestSpec* s) { s->problem.softmax_scale = 0.5f; },
           [](RequestSpec* s) { s->problem.return_lse = true; },
           [](RequestSpec* s) { s->problem.heads_kv = 2; },
           [](RequestSpec* s) { s->dtype = DType::kFloat16; }}) {
    RequestSpec other = a.spec;
    change(&other);
    EXPECT_FALSE(SameBatchKey(a.spec, other)) << other.problem.ToString();
  }
  Job varlen;
  varlen.spec = a.spec;
  varlen.spec.problem.varlen = true;
  varlen.out = TensorDestination::Host(&out);
  EXPECT_FALSE(Stackable(varlen));
  // Where the tensors are does not matter: the launch plan copies each to
  // and from its place.
  const char region_bytes[16] = {};
  char region_out[16];
  Job region;
  region.spec = a.spec;
  region.k = TensorSource::InRegion(absl::string_view(region_bytes, 16), SourceKind::kSystemRegion);
  region.out = TensorDestination::InRegion(DestinationKind::kDeviceRegion, region_out);
  EXPECT_TRUE(Stackable(region));
  Job no_lse;
  no_lse.spec = a.spec;
  no_lse.spec.problem.return_lse = true;  // and no place for the LSE
  no_lse.out = TensorDestination::Host(&out);
  EXPECT_FALSE(Stackable(no_lse));
}

}  // namespace
}  // namespace attn::server
