// When an open-loop load generator sends: a fixed request rate with constant
// gaps, or a Poisson process (exponential gaps with the same mean) as
// arrivals from many independent users look. The schedule is fixed in
// advance and does not depend on responses; that is what makes latency
// measured from it free of coordinated omission.
#ifndef ATTN_CLIENT_LOADGEN_ARRIVAL_SCHEDULE_H_
#define ATTN_CLIENT_LOADGEN_ARRIVAL_SCHEDULE_H_

#include <cstdint>
#include <random>

namespace attn::loadgen {

enum class Arrivals { kConstant, kPoisson };

class ArrivalSchedule {
 public:
  // `rate` requests per second (> 0); `seed` fixes the Poisson draws.
  ArrivalSchedule(Arrivals arrivals, double rate, uint64_t seed);

  // Offset of the next arrival from the schedule's start, in nanoseconds;
  // the first arrival is at 0. Non-decreasing.
  int64_t Next();

 private:
  const Arrivals arrivals_;
  const double mean_gap_ns_;
  std::mt19937_64 rng_;
  std::exponential_distribution<double> exponential_{1.0};
  int64_t index_ = 0;
  double next_ns_ = 0.0;
};

}  // namespace attn::loadgen

#endif  // ATTN_CLIENT_LOADGEN_ARRIVAL_SCHEDULE_H_
