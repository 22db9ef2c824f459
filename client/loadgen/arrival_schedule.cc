#include "arrival_schedule.h"

#include <cmath>

namespace attn::loadgen {

ArrivalSchedule::ArrivalSchedule(Arrivals arrivals, double rate, uint64_t seed)
    : arrivals_(arrivals), mean_gap_ns_(1e9 / rate), rng_(seed) {}

int64_t ArrivalSchedule::Next() {
  // Constant gaps are computed from the index, not accumulated, so rounding
  // does not drift over millions of requests.
  if (arrivals_ == Arrivals::kConstant) {
    return static_cast<int64_t>(std::llround(static_cast<double>(index_++) * mean_gap_ns_));
  }
  const double now = next_ns_;
  next_ns_ += exponential_(rng_) * mean_gap_ns_;
  ++index_;
  return static_cast<int64_t>(std::llround(now));
}

}  // namespace attn::loadgen
