// Unit tests of the two small admission primitives: CallGate (calls in
// progress, closed while draining) and ByteBudget (AttendStream buffers).
#include <atomic>
#include <thread>
#include <vector>

#include "absl/time/clock.h"
#include "scheduling/byte_budget.h"
#include "frontend/call_gate.h"
#include "gtest/gtest.h"

namespace attn::server {
namespace {

TEST(CallGateTest, CountsCallsAndRefusesOnceClosed) {
  CallGate gate;
  EXPECT_TRUE(gate.WaitIdle(absl::ZeroDuration()));
  ASSERT_TRUE(gate.Enter());
  ASSERT_TRUE(gate.Enter());
  EXPECT_EQ(gate.active(), 2);
  gate.Close();
  EXPECT_FALSE(gate.Enter()) << "a closed gate admits nothing";
  EXPECT_FALSE(gate.WaitIdle(absl::Milliseconds(20))) << "two calls are still inside";
  gate.Leave();
  std::thread last([&gate]() {
    absl::SleepFor(absl::Milliseconds(20));
    gate.Leave();
  });
  EXPECT_TRUE(gate.WaitIdle(absl::Seconds(30)));
  EXPECT_EQ(gate.active(), 0);
  last.join();
}

TEST(ByteBudgetTest, ReservesUpToTheLimitAndNoFurther) {
  ByteBudget budget(100);
  EXPECT_TRUE(budget.TryReserve(60));
  EXPECT_FALSE(budget.TryReserve(41)) << "60 + 41 > 100";
  EXPECT_EQ(budget.used(), 60) << "a refused reservation takes nothing";
  EXPECT_TRUE(budget.TryReserve(40));
  EXPECT_FALSE(budget.TryReserve(1));
  budget.Release(60);
  EXPECT_TRUE(budget.TryReserve(60));
  EXPECT_EQ(budget.used(), 100);
  EXPECT_EQ(budget.limit(), 100);
}

TEST(ByteBudgetTest, ConcurrentReservationsNeverExceedTheLimit) {
  ByteBudget budget(1000);
  std::vector<std::thread> threads;
  std::atomic<int> granted{0};
  for (int t = 0; t < 8; ++t) {
    threads.emplace_back([&]() {
      for (int i = 0; i < 1000; ++i) {
        if (budget.TryReserve(7)) {
          granted.fetch_add(1);
          EXPECT_LE(budget.used(), 1000);
          budget.Release(7);
        }
      }
    });
  }
  for (std::thread& thread : threads) thread.join();
  EXPECT_EQ(budget.used(), 0);
  EXPECT_GT(granted.load(), 0);
}

}  // namespace
}  // namespace attn::server
