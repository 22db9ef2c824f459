// Scheduler unit tests with a fake executor whose jobs block until released,
// so every queue state is reached deterministically (no timing guesses
// except for deadlines, which the test waits out before the worker may look).
#include "scheduling/scheduler.h"

#include <atomic>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/synchronization/mutex.h"
#include "absl/synchronization/notification.h"
#include "absl/time/clock.h"
#include "gtest/gtest.h"

namespace attn::server {
namespace {

// Runs a job by waiting until the test releases it; records what ran.
class FakeExecutor : public JobByJobExecutor {
 public:
  explicit FakeExecutor(std::string name) : name_(std::move(name)) {}

  absl::Status RunJob(Job& job) override {
    {
      absl::MutexLock lock(&mu_);
      started_.push_back(job.spec.request_id);
      mu_.Await(absl::Condition(
          +[](FakeExecutor* e) { return e->released_ > 0 || e->release_all_; }, this));
      if (!release_all_) --released_;
    }
    job.device = name_;
    job.times.kernel_ns = 1;
    if (job.spec.request_id == "fail") return absl::InternalError("device fell over");
    if (job.spec.request_id == "break") {
      healthy_ = false;
      return absl::InternalError("device broke for good");
    }
    return absl::OkStatus();
  }
  std::string Name() const override { return name_; }
  bool Healthy() const override { return healthy_; }

  // Lets one blocked (or future) Run return.
  void ReleaseOne() {
    absl::MutexLock lock(&mu_);
    ++released_;
  }
  void ReleaseAll() {
    absl::MutexLock lock(&mu_);
    release_all_ = true;
  }
  std::vector<std::string> started() {
    absl::MutexLock lock(&mu_);
    return started_;
  }

 private:
  std::string name_;
  absl::Mutex mu_;
  int released_ = 0;
  bool release_all_ = false;
  std::vector<std::string> started_;
  std::atomic<bool> healthy_{true};
};

// Deadlines in the queue: a job's deadline lies this far ahead when it is
// submitted (Submit refuses a job already past it), and the test sleeps until
// it has passed before it lets the worker reach the job. Only a stall of this
// length between two statements of the test could make Submit refuse it.
constexpr absl::Duration kDeadlineMargin = absl::Seconds(1);

void SleepUntil(absl::Time t) {
  for (absl::Time now = absl::Now(); now < t; now = absl::Now()) absl::SleepFor(t - now);
}

// Collects completions.
struct Completions {
  absl::Mutex mu;
  std::vector<std::pair<std::string, absl::Status>> done;
  std::vector<int64_t> queue_ns;

  void Add(const Job& job, absl::Status status) {
    absl::MutexLock lock(&mu);
    done.emplace_back(job.spec.request_id, std::move(status));
    queue_ns.push_back(job.times.queue_ns);
  }
  void WaitFor(size_t n) {
    absl::MutexLock lock(&mu);
    wanted = n;
    ASSERT_TRUE(mu.AwaitWithTimeout(absl::Condition(this, &Completions::Enough), absl::Seconds(30)))
        << "only " << done.size() << " of " << n << " jobs completed";
  }
  bool Enough() const { return done.size() >= wanted; }
  size_t wanted = 0;
  absl::Status StatusOf(const std::string& id) {
    absl::MutexLock lock(&mu);
    for (auto& [job_id, status] : done) {
      if (job_id == id) return status;
    }
    return absl::UnknownError("not completed: " + id);
  }
  size_t size() {
    absl::MutexLock lock(&mu);
    return done.size();
  }
};

class SchedulerTest : public ::testing::Test {
 protected:
  // A scheduler over `workers` fake executors (`completion_threads` as
  // Scheduler's).
  void Make(int workers, int capacity, absl::AnyInvocable<void()> on_all_failed = nullptr,
            int completion_threads = 0) {
    std::vector<std::unique_ptr<Executor>> executors;
    for (int i = 0; i < workers; ++i) {
      auto executor = std::make_unique<FakeExecutor>("fake" + std::to_string(i));
      fakes_.push_back(executor.get());
      executors.push_back(std::move(executor));
    }
    scheduler_ = std::make_unique<Scheduler>(std::move(executors), capacity,
                                             std::move(on_all_failed), BatchPolicy{},
                                             completion_threads);
  }

  std::unique_ptr<Job> NewJob(const std::string& id, absl::Time deadline = absl::InfiniteFuture()) {
    auto job = std::make_unique<Job>();
    job->spec.request_id = id;
    job->deadline = deadline;
    job->cancelled = &cancelled_[id];
    job->done = [this](std::unique_ptr<Job> j, absl::Status s) { completions_.Add(*j, s); };
    return job;
  }

  absl::Status Submit(const std::string& id, absl::Time deadline = absl::InfiniteFuture()) {
    std::unique_ptr<Job> job = NewJob(id, deadline);
    absl::Status status = scheduler_->Submit(job);
    EXPECT_EQ(status.ok(), job == nullptr) << "ownership moves exactly when Submit is OK";
    return status;
  }

  // Waits until the scheduler reports `running` running and `queued` queued.
  void WaitForLoad(int64_t running, int64_t queued) {
    const absl::Time deadline = absl::Now() + absl::Seconds(30);
    while (absl::Now() < deadline) {
      Scheduler::Load load = scheduler_->load();
      if (load.running == running && load.queued == queued) return;
      absl::SleepFor(absl::Milliseconds(1));
    }
    FAIL() << "scheduler never reached running=" << running << " queued=" << queued;
  }

  // Submits "first", whose `done` notifies `entered` and blocks until
  // `release` is notified, and "second", lets worker 0 run them, and
  // returns once first's `done` is blocking. Both must outlive that `done`.
  void RunFirstWhoseDoneBlocksThenSecond(absl::Notification& entered,
                                         absl::Notification& release) {
    std::unique_ptr<Job> first = NewJob("first");
    first->done = [this, &entered, &release](std::unique_ptr<Job> j, absl::Status s) {
      entered.Notify();
      release.WaitForNotification();
      completions_.Add(*j, s);
    };
    ASSERT_TRUE(scheduler_->Submit(first).ok());
    ASSERT_TRUE(Submit("second").ok());
    fakes_[0]->ReleaseAll();
    ASSERT_TRUE(entered.WaitForNotificationWithTimeout(absl::Seconds(30)));
  }

  void TearDown() override {
    // The scheduler owns the fakes: once a test has reset it they are gone.
    if (scheduler_ == nullptr) return;
    for (FakeExecutor* fake : fakes_) fake->ReleaseAll();
    scheduler_.reset();  // joins workers: every job completes first
  }

  std::map<std::string, std::atomic<bool>> cancelled_;
  std::vector<FakeExecutor*> fakes_;
  Completions completions_;
  std::unique_ptr<Scheduler> scheduler_;
};

TEST_F(SchedulerTest, RunsJobsInOrderAndCompletesEachOnce) {
  Make(1, 8);
  for (const char* id : {"a", "b", "c"}) ASSERT_TRUE(Submit(id).ok());
  fakes_[0]->ReleaseAll();
  completions_.WaitFor(3);
  EXPECT_EQ(fakes_[0]->started(), (std::vector<std::string>{"a", "b", "c"}));
  for (const char* id : {"a", "b", "c"}) EXPECT_TRUE(completions_.StatusOf(id).ok()) << id;
  scheduler_.reset();
  EXPECT_EQ(completions_.size(), 3u);
}

TEST_F(SchedulerTest, FullQueueAnswersResourceExhaustedAtOnce) {
  Make(1, 2);
  ASSERT_TRUE(Submit("running").ok());
  WaitForLoad(1, 0);
  ASSERT_TRUE(Submit("queued1").ok());
  ASSERT_TRUE(Submit("queued2").ok());
  // Submit must not wait: nothing makes room before ReleaseAll below, so a
  // Submit that waited for room would never return.
  absl::Status full = Submit("refused");
  EXPECT_EQ(full.code(), absl::StatusCode::kResourceExhausted) << full;
  EXPECT_NE(full.message().find("queue_capacity=2"), std::string::npos) << full;
  fakes_[0]->ReleaseAll();
  completions_.WaitFor(3);
  EXPECT_EQ(completions_.StatusOf("refused").code(), absl::StatusCode::kUnknown)
      << "a refused job's done must never run";
}

TEST_F(SchedulerTest, ZeroCapacityAdmitsOnlyWhatIdleWorkersTake) {
  Make(2, 0);
  ASSERT_TRUE(Submit("a").ok());
  ASSERT_TRUE(Submit("b").ok());
  EXPECT_EQ(Submit("c").code(), absl::StatusCode::kResourceExhausted);
  WaitForLoad(2, 0);
  fakes_[0]->ReleaseAll();
  fakes_[1]->ReleaseAll();
  completions_.WaitFor(2);
  WaitForLoad(0, 0);
  EXPECT_TRUE(Submit("d").ok());
}

TEST_F(SchedulerTest, WorkersRunConcurrently) {
  Make(3, 0);
  for (const char* id : {"a", "b", "c"}) ASSERT_TRUE(Submit(id).ok());
  WaitForLoad(3, 0);
}

TEST_F(SchedulerTest, JobPastItsDeadlineInTheQueueIsNotRun) {
  Make(1, 4);
  ASSERT_TRUE(Submit("blocker").ok());
  WaitForLoad(1, 0);
  const absl::Time deadline = absl::Now() + kDeadlineMargin;
  ASSERT_TRUE(Submit("late", deadline).ok());
  SleepUntil(deadline);  // the worker reaches "late" only after its deadline
  fakes_[0]->ReleaseAll();
  completions_.WaitFor(2);
  absl::Status late = completions_.StatusOf("late");
  EXPECT_EQ(late.code(), absl::StatusCode::kDeadlineExceeded) << late;
  EXPECT_NE(late.message().find("not run"), std::string::npos) << late;
  EXPECT_EQ(fakes_[0]->started(), std::vector<std::string>{"blocker"});
}

TEST_F(SchedulerTest, JobCancelledInTheQueueIsNotRun) {
  Make(1, 4);
  ASSERT_TRUE(Submit("blocker").ok());
  WaitForLoad(1, 0);
  ASSERT_TRUE(Submit("cancelled").ok());
  cancelled_["cancelled"] = true;
  fakes_[0]->ReleaseAll();
  completions_.WaitFor(2);
  EXPECT_EQ(completions_.StatusOf("cancelled").code(), absl::StatusCode::kCancelled);
  EXPECT_EQ(fakes_[0]->started(), std::vector<std::string>{"blocker"});
}

TEST_F(SchedulerTest, ExpiredOrCancelledJobsAreRefusedBeforeQueueing) {
  Make(1, 4);
  EXPECT_EQ(Submit("expired", absl::Now() - absl::Seconds(1)).code(),
            absl::StatusCode::kDeadlineExceeded);
  std::unique_ptr<Job> job = NewJob("cancelled");
  cancelled_["cancelled"] = true;
  EXPECT_EQ(scheduler_->Submit(job).code(), absl::StatusCode::kCancelled);
  EXPECT_NE(job, nullptr);
}

TEST_F(SchedulerTest, FullQueueMakesRoomByDroppingDeadJobs) {
  Make(1, 1);
  ASSERT_TRUE(Submit("blocker").ok());
  WaitForLoad(1, 0);
  const absl::Time deadline = absl::Now() + kDeadlineMargin;
  ASSERT_TRUE(Submit("doomed", deadline).ok());
  SleepUntil(deadline);
  // The queue is full, but its only job is past its deadline.
  ASSERT_TRUE(Submit("fresh").ok());
  EXPECT_EQ(completions_.StatusOf("doomed").code(), absl::StatusCode::kDeadlineExceeded);
  fakes_[0]->ReleaseAll();
  completions_.WaitFor(3);
  EXPECT_TRUE(completions_.StatusOf("fresh").ok());
}

TEST_F(SchedulerTest, ExecutorErrorsReachDone) {
  Make(1, 1);
  fakes_[0]->ReleaseAll();
  ASSERT_TRUE(Submit("fail").ok());
  completions_.WaitFor(1);
  EXPECT_EQ(completions_.StatusOf("fail").code(), absl::StatusCode::kInternal);
}

TEST_F(SchedulerTest, BrokenExecutorsRetireAndTheLastOneFailsTheQueue) {
  absl::Notification all_failed;
  Make(2, 4, [&all_failed]() { all_failed.Notify(); });
  // One worker breaks; the other keeps serving, with one worker less of room.
  fakes_[0]->ReleaseAll();
  fakes_[1]->ReleaseAll();
  ASSERT_TRUE(Submit("break").ok());
  completions_.WaitFor(1);
  EXPECT_EQ(completions_.StatusOf("break").code(), absl::StatusCode::kInternal);
  const absl::Time deadline = absl::Now() + absl::Seconds(30);
  while (scheduler_->live_workers() != 1 && absl::Now() < deadline) {
    absl::SleepFor(absl::Milliseconds(1));
  }
  ASSERT_EQ(scheduler_->live_workers(), 1);
  ASSERT_TRUE(Submit("fine").ok());
  completions_.WaitFor(2);
  EXPECT_TRUE(completions_.StatusOf("fine").ok());
  EXPECT_FALSE(all_failed.HasBeenNotified());
  // The last one breaks too: the server can run nothing and says so.
  ASSERT_TRUE(Submit("break").ok());
  ASSERT_TRUE(all_failed.WaitForNotificationWithTimeout(absl::Seconds(30)));
  EXPECT_EQ(scheduler_->live_workers(), 0);
  absl::Status refused = Submit("after");
  EXPECT_EQ(refused.code(), absl::StatusCode::kUnavailable) << refused;
}

// Two workers that retire at the same moment: both decrements happen before
// either worker decides whether it was the last, so a decision taken outside
// the lock would fire twice. (The completions wait for each other, each on
// its worker's completion thread: so both are in flight together.)
TEST_F(SchedulerTest, WorkersRetiringTogetherReportAllFailedExactlyOnce) {
  std::atomic<int> all_failed_calls{0};
  absl::Notification all_failed;
  Make(2, 4, [&]() {
    if (++all_failed_calls == 1) all_failed.Notify();
  });
  absl::Mutex barrier_mu;
  int arrived = 0;
  for (const char* id : {"break", "break"}) {
    std::unique_ptr<Job> job = NewJob(id);
    job->done = [&](std::unique_ptr<Job> j, absl::Status s) {
      absl::MutexLock lock(&barrier_mu);
      ++arrived;
      barrier_mu.Await(absl::Condition(
          +[](int* n) { return *n >= 2; }, &arrived));
      completions_.Add(*j, s);
    };
    ASSERT_TRUE(scheduler_->Submit(job).ok());
  }
  WaitForLoad(2, 0);  // each worker holds one "break"
  fakes_[0]->ReleaseAll();
  fakes_[1]->ReleaseAll();
  ASSERT_TRUE(all_failed.WaitForNotificationWithTimeout(absl::Seconds(30)));
  scheduler_.reset();  // joins both workers: every call they would make is made
  EXPECT_EQ(all_failed_calls.load(), 1);
  EXPECT_EQ(completions_.size(), 2u);
}

// The worker hands a finished job to its completion thread and takes the
// next at once: a `done` that takes long (gRPC starting a large write) does
// not hold up the device. Completions keep the worker's order.
TEST_F(SchedulerTest, WorkerRunsTheNextJobWhileTheLastOneCompletes) {
  Make(1, 4);
  absl::Notification first_done_entered, let_first_done_return;
  ASSERT_NO_FATAL_FAILURE(
      RunFirstWhoseDoneBlocksThenSecond(first_done_entered, let_first_done_return));
  // With "first"'s done still running, the worker has run "second".
  const absl::Time deadline = absl::Now() + absl::Seconds(30);
  while (fakes_[0]->started().size() < 2 && absl::Now() < deadline) {
    absl::SleepFor(absl::Milliseconds(1));
  }
  EXPECT_EQ(fakes_[0]->started(), (std::vector<std::string>{"first", "second"}));
  EXPECT_EQ(completions_.size(), 0u);
  let_first_done_return.Notify();
  completions_.WaitFor(2);
  absl::MutexLock lock(&completions_.mu);
  EXPECT_EQ(completions_.done[0].first, "first");
  EXPECT_EQ(completions_.done[1].first, "second");
}

// With a pool of completion threads, one worker's next response does not
// wait for the last one's: a `done` that blocks holds up only its own
// thread, and the second job completes on another while it blocks.
TEST_F(SchedulerTest, ACompletionPoolCompletesTheNextJobWhileTheLastOneBlocks) {
  Make(1, 4, nullptr, /*completion_threads=*/2);
  absl::Notification first_done_entered, let_first_done_return;
  ASSERT_NO_FATAL_FAILURE(
      RunFirstWhoseDoneBlocksThenSecond(first_done_entered, let_first_done_return));
  completions_.WaitFor(1);  // "second", on the pool's other thread
  {
    absl::MutexLock lock(&completions_.mu);
    EXPECT_EQ(completions_.done[0].first, "second");
  }
  let_first_done_return.Notify();
  completions_.WaitFor(2);
  EXPECT_TRUE(completions_.StatusOf("first").ok());
  EXPECT_TRUE(completions_.StatusOf("second").ok());
}

TEST_F(SchedulerTest, QueueTimeIsMeasured) {
  Make(1, 2);
  ASSERT_TRUE(Submit("blocker").ok());
  WaitForLoad(1, 0);
  ASSERT_TRUE(Submit("waiter").ok());
  const absl::Time queued_by = absl::Now();  // "waiter" was queued before this
  absl::SleepFor(absl::Milliseconds(50));
  const absl::Time released = absl::Now();  // and is taken by the worker after this
  fakes_[0]->ReleaseAll();
  completions_.WaitFor(2);
  absl::MutexLock lock(&completions_.mu);
  ASSERT_EQ(completions_.done[1].first, "waiter");
  EXPECT_GE(completions_.queue_ns[1], absl::ToInt64Nanoseconds(released - queued_by));
}

TEST_F(SchedulerTest, StopRefusesNewJobsButFinishesQueuedOnes) {
  Make(1, 4);
  ASSERT_TRUE(Submit("running").ok());
  ASSERT_TRUE(Submit("queued").ok());
  scheduler_->Stop();
  EXPECT_EQ(Submit("late").code(), absl::StatusCode::kUnavailable);
  fakes_[0]->ReleaseAll();
  scheduler_.reset();
  EXPECT_TRUE(completions_.StatusOf("running").ok());
  EXPECT_TRUE(completions_.StatusOf("queued").ok());
}

}  // namespace
}  // namespace attn::server
