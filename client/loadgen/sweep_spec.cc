#include "sweep_spec.h"

#include <cmath>
#include <string>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"

namespace attn::loadgen {
namespace {

absl::Status Invalid(absl::string_view spec, absl::string_view why) {
  return absl::InvalidArgumentError(absl::StrCat("sweep '", spec, "': ", why));
}

bool ParsePositive(absl::string_view text, double* value) {
  return absl::SimpleAtod(absl::StripAsciiWhitespace(text), value) && std::isfinite(*value) &&
         *value > 0;
}

}  // namespace

absl::StatusOr<std::vector<double>> ParseSweep(absl::string_view spec) {
  std::vector<double> levels;
  if (spec.find(':') == absl::string_view::npos) {
    for (absl::string_view part : absl::StrSplit(spec, ',')) {
      double value;
      if (!ParsePositive(part, &value)) {
        return Invalid(spec, absl::StrCat("'", part, "' is not a number > 0"));
      }
      levels.push_back(value);
    }
  } else {
    const std::vector<absl::string_view> parts = absl::StrSplit(spec, ':');
    if (parts.size() != 3) return Invalid(spec, "a range is start:end:step or start:end:xFACTOR");
    double start, end, step;
    if (!ParsePositive(parts[0], &start) || !ParsePositive(parts[1], &end)) {
      return Invalid(spec, "start and end must be numbers > 0");
    }
    if (end < start) return Invalid(spec, "end is below start");
    absl::string_view step_text = absl::StripAsciiWhitespace(parts[2]);
    const bool geometric = absl::ConsumePrefix(&step_text, "x");
    absl::ConsumePrefix(&step_text, "+");
    if (!ParsePositive(step_text, &step) || (geometric && step <= 1.0)) {
      return Invalid(spec, geometric ? "a factor must be > 1" : "a step must be > 0");
    }
    // A little slack so 0.1-style steps still reach their end exactly.
    const double limit = end * (1 + 1e-9);
    for (double value = start; value <= limit; value = geometric ? value * step : value + step) {
      if (static_cast<int>(levels.size()) >= kMaxSweepLevels) break;
      levels.push_back(value);
    }
  }
  if (levels.empty()) return Invalid(spec, "no levels");
  if (static_cast<int>(levels.size()) >= kMaxSweepLevels) {
    return Invalid(spec, absl::StrCat("more than ", kMaxSweepLevels - 1, " levels"));
  }
  return levels;
}

absl::StatusOr<std::vector<int>> ParseIntegerSweep(absl::string_view spec) {
  absl::StatusOr<std::vector<double>> levels = ParseSweep(spec);
  if (!levels.ok()) return levels.status();
  std::vector<int> integers;
  for (double value : *levels) {
    if (value != std::floor(value) || value > 1e6) {
      return Invalid(spec, absl::StrCat(value, " is not a whole number up to 1000000"));
    }
    integers.push_back(static_cast<int>(value));
  }
  return integers;
}

}  // namespace attn::loadgen
