// fuzz/tuning_table_fuzzer.cc
//
// The tuning-table parser (kernels/ladder/tuning.cc, attn/tuning.h) on
// arbitrary text, as a node's $ATTN_TUNING_TABLE file could hold.
//
// Asserted, for every input:
//   1. a refusal is INVALID_ARGUMENT naming the line;
//   2. an accepted table has a device and a candidate in every entry, and no
//      field holds a tab or a line break;
//   3. it round-trips: FormatTuningTable of its entries parses back to the
//      same entries.
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/match.h"
#include "absl/strings/string_view.h"
#include "attn/tuning.h"
#include "fuzz_check.h"

namespace {

bool OneLineField(const std::string& field) {
  return field.find_first_of("\t\n") == std::string::npos;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const absl::string_view text(reinterpret_cast<const char*>(data), size);
  absl::StatusOr<std::vector<attn::TuningEntry>> entries = attn::ParseTuningTable(text);
  if (!entries.ok()) {
    FUZZ_CHECK(entries.status().code() == absl::StatusCode::kInvalidArgument, "%s",
               entries.status().ToString().c_str());
    FUZZ_CHECK(absl::StartsWith(entries.status().message(), "tuning table line "), "%s",
               entries.status().ToString().c_str());
    return 0;
  }
  for (const attn::TuningEntry& e : *entries) {
    FUZZ_CHECK(!e.device.empty() && !e.candidate.empty(), "an entry without device or candidate");
    FUZZ_CHECK(OneLineField(e.device) && OneLineField(e.candidate) && OneLineField(e.note),
               "a field with a tab or a line break");
  }

  const std::string formatted = attn::FormatTuningTable(*entries);
  absl::StatusOr<std::vector<attn::TuningEntry>> again = attn::ParseTuningTable(formatted);
  FUZZ_CHECK(again.ok(), "%s", again.status().ToString().c_str());
  FUZZ_CHECK(again->size() == entries->size(), "%zu entries, then %zu", entries->size(),
             again->size());
  for (size_t i = 0; i < entries->size(); ++i) {
    const attn::TuningEntry& a = (*entries)[i];
    const attn::TuningEntry& b = (*again)[i];
    FUZZ_CHECK(a.device == b.device && a.candidate == b.candidate && a.note == b.note,
               "entry %zu changed in the round trip", i);
  }
  return 0;
}
