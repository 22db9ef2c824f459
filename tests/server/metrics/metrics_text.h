// tests/server/metrics/metrics_text.h
//
// Reading samples out of a Prometheus text exposition (what GET /metrics
// returns) in the metrics suites.
#ifndef ATTN_TESTS_SERVER_METRICS_METRICS_TEXT_H_
#define ATTN_TESTS_SERVER_METRICS_METRICS_TEXT_H_

#include <optional>
#include <string>

#include "absl/strings/numbers.h"
#include "absl/strings/str_split.h"
#include "absl/strings/string_view.h"
#include "absl/strings/strip.h"

namespace attn::testing {

// The value of `series` (the name and labels exactly as exposed, labels in
// name order: `attn_x{kernel="k",rpc="Attend"}`, or a bare name), or
// nullopt when no line has it.
inline std::optional<double> SampleValue(absl::string_view text, absl::string_view series) {
  for (absl::string_view line : absl::StrSplit(text, '\n')) {
    if (!absl::ConsumePrefix(&line, series) || !absl::ConsumePrefix(&line, " ")) continue;
    double value = 0;
    if (absl::SimpleAtod(line, &value)) return value;
  }
  return std::nullopt;
}

}  // namespace attn::testing

#endif  // ATTN_TESTS_SERVER_METRICS_METRICS_TEXT_H_
