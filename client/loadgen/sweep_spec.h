// The load levels of a sweep, written the way perf_analyzer users write
// them: one value ("8"), a list ("1,2,4,8"), an additive range
// ("4:32:4", start:end:step) or a geometric one ("1:64:x2", each level the
// previous times 2). Ranges include their end when a step lands on it.
#ifndef ATTN_CLIENT_LOADGEN_SWEEP_SPEC_H_
#define ATTN_CLIENT_LOADGEN_SWEEP_SPEC_H_

#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace attn::loadgen {

// The levels `spec` names, in order. INVALID_ARGUMENT (quoting the spec)
// for malformed text, values <= 0, a step that does not advance, or more
// than kMaxSweepLevels levels.
absl::StatusOr<std::vector<double>> ParseSweep(absl::string_view spec);

// The same, for levels that must be whole numbers (concurrency).
absl::StatusOr<std::vector<int>> ParseIntegerSweep(absl::string_view spec);

inline constexpr int kMaxSweepLevels = 1000;

}  // namespace attn::loadgen

#endif  // ATTN_CLIENT_LOADGEN_SWEEP_SPEC_H_
