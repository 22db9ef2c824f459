// The test-only fault injection (--test_inject_worker_faults): the spec's
// parser, FaultInjectingExecutor around a counting executor, and the
// wrapping of a server's executors; then a wrapped executor under the real
// Scheduler, which retires it as it would a GPU with a sticky error.
#include "backends/fault_injecting_executor.h"

#include <memory>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/notification.h"
#include "core/worker_fault_spec.h"
#include "gtest/gtest.h"
#include "scheduling/scheduler.h"

namespace attn::server {
namespace {

// Runs every job successfully and counts them.
class CountingExecutor : public JobByJobExecutor {
 public:
  explicit CountingExecutor(std::string name) : name_(std::move(name)) {}
  absl::Status RunJob(Job& job) override {
    ++runs_;
    job.device = name_;
    return absl::OkStatus();
  }
  std::string Name() const override { return name_; }
  int runs() const { return runs_; }

 private:
  std::string name_;
  int runs_ = 0;
};

TEST(WorkerFaultSpecTest, ParsesPairsAndRefusesBadSpecsNamingTheFlag) {
  auto none = ParseWorkerFaults("");
  ASSERT_TRUE(none.ok()) << none.status();
  EXPECT_TRUE(none->empty());

  auto faults = ParseWorkerFaults("0:2,3:0");
  ASSERT_TRUE(faults.ok()) << faults.status();
  ASSERT_EQ(faults->size(), 2u);
  EXPECT_EQ((*faults)[0].worker, 0);
  EXPECT_EQ((*faults)[0].good_jobs, 2);
  EXPECT_EQ((*faults)[1].worker, 3);
  EXPECT_EQ((*faults)[1].good_jobs, 0);
  EXPECT_EQ(FormatWorkerFaults(*faults), "0:2,3:0");

  for (const char* bad : {"1", "1:", ":0", "a:0", "1:b", "-1:0", "1:-2", "1:0,", "1:0:0", "1;0"}) {
    auto refused = ParseWorkerFaults(bad);
    EXPECT_EQ(refused.status().code(), absl::StatusCode::kInvalidArgument) << bad;
    EXPECT_TRUE(absl::StrContains(refused.status().message(), kWorkerFaultFlag))
        << bad << ": " << refused.status();
    EXPECT_TRUE(absl::StrContains(refused.status().message(), "WORKER:GOOD_JOBS"))
        << bad << ": " << refused.status();
  }
  auto twice = ParseWorkerFaults("1:0,1:3");
  EXPECT_EQ(twice.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_TRUE(absl::StrContains(twice.status().message(),
                                absl::StrCat(kWorkerFaultFlag, " names worker 1 twice")))
      << twice.status();
}

TEST(FaultInjectingExecutorTest, RunsGoodJobsThenFailsForGoodWithoutRunning) {
  auto owned = std::make_unique<CountingExecutor>("counting");
  CountingExecutor* inner = owned.get();
  FaultInjectingExecutor executor(std::move(owned), /*worker=*/1, /*good_jobs=*/2);
  EXPECT_TRUE(absl::StrContains(executor.Name(), "counting")) << executor.Name();
  EXPECT_TRUE(absl::StrContains(executor.Name(), "test fault after 2 jobs")) << executor.Name();

  for (int i = 0; i < 2; ++i) {
    Job job;
    EXPECT_TRUE(RunOne(executor, job).ok());
    EXPECT_EQ(job.device, "counting") << "a good job runs on the wrapped executor";
    EXPECT_TRUE(executor.Healthy());
  }
  EXPECT_EQ(inner->runs(), 2);

  // The fault, and every job after it: INTERNAL, nothing run, unhealthy.
  for (int i = 0; i < 2; ++i) {
    std::string out;
    Job job;
    job.out = TensorDestination::Host(&out);
    const absl::Status status = RunOne(executor, job);
    EXPECT_EQ(status.code(), absl::StatusCode::kInternal) << status;
    EXPECT_TRUE(absl::StrContains(status.message(), "injected device fault on worker 1")) << status;
    EXPECT_TRUE(absl::StrContains(status.message(), kWorkerFaultFlag)) << status;
    EXPECT_TRUE(out.empty()) << "a failed job writes no output";
    EXPECT_FALSE(executor.Healthy());
  }
  EXPECT_EQ(inner->runs(), 2) << "the fault must not reach the wrapped executor";
}

TEST(FaultInjectingExecutorTest, WrapsOnlyTheNamedWorkersAndRefusesUnknownOnes) {
  std::vector<std::unique_ptr<Executor>> executors;
  for (const char* name : {"w0", "w1", "w2"}) {
    executors.push_back(std::make_unique<CountingExecutor>(name));
  }
  ASSERT_TRUE(InjectWorkerFaults({}, &executors).ok());
  EXPECT_EQ(executors[1]->Name(), "w1") << "no faults change nothing";

  const absl::Status unknown = InjectWorkerFaults({{1, 0}, {3, 0}}, &executors);
  EXPECT_EQ(unknown.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_TRUE(
      absl::StrContains(unknown.message(), absl::StrCat(kWorkerFaultFlag, " names worker 3")))
      << unknown;
  EXPECT_TRUE(absl::StrContains(unknown.message(), "3 worker(s)")) << unknown;
  EXPECT_EQ(executors[1]->Name(), "w1") << "a refused spec wraps nothing";

  ASSERT_TRUE(InjectWorkerFaults({{1, 0}}, &executors).ok());
  EXPECT_EQ(executors[0]->Name(), "w0");
  EXPECT_EQ(executors[2]->Name(), "w2");
  Job job;
  EXPECT_EQ(RunOne(*executors[1], job).code(), absl::StatusCode::kInternal);
  EXPECT_FALSE(executors[1]->Healthy());
  EXPECT_TRUE(RunOne(*executors[0], job).ok());
}

// One worker, faulted after one good job, under the real Scheduler: the
// job after the good one gets INTERNAL, the worker retires, the all-failed
// callback runs once, and the next job is refused with UNAVAILABLE.
TEST(FaultInjectingExecutorTest, SchedulerRetiresTheFaultedWorker) {
  std::vector<std::unique_ptr<Executor>> executors;
  executors.push_back(std::make_unique<CountingExecutor>("only"));
  ASSERT_TRUE(InjectWorkerFaults({{0, 1}}, &executors).ok());
  absl::Notification all_failed;
  Scheduler scheduler(std::move(executors), /*queue_capacity=*/4,
                      [&all_failed]() { all_failed.Notify(); });

  // Submits one job and waits for its status.
  auto run_one = [&scheduler]() {
    absl::Notification done;
    absl::Status result;
    auto job = std::make_unique<Job>();
    job->done = [&](std::unique_ptr<Job>, absl::Status status) {
      result = std::move(status);
      done.Notify();
    };
    const absl::Status submitted = scheduler.Submit(job);
    if (!submitted.ok()) return submitted;
    done.WaitForNotification();
    return result;
  };

  EXPECT_TRUE(run_one().ok());
  EXPECT_EQ(scheduler.live_workers(), 1);
  const absl::Status faulted = run_one();
  EXPECT_EQ(faulted.code(), absl::StatusCode::kInternal) << faulted;
  EXPECT_TRUE(all_failed.WaitForNotificationWithTimeout(absl::Seconds(60)));
  EXPECT_EQ(scheduler.live_workers(), 0);
  EXPECT_EQ(scheduler.worker_health(), std::vector<bool>{false});
  const absl::Status refused = run_one();
  EXPECT_EQ(refused.code(), absl::StatusCode::kUnavailable) << refused;
}

}  // namespace
}  // namespace attn::server
