#include "attn/tuning.h"

#include <cstdlib>
#include <fstream>
#include <sstream>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"

namespace attn {
namespace {

// Where the first control character (a stray '\r', say) of `field` is, or
// npos.
size_t FindControlCharacter(absl::string_view field) {
  for (size_t i = 0; i < field.size(); ++i) {
    const unsigned char c = static_cast<unsigned char>(field[i]);
    if (c < 0x20 || c == 0x7f) return i;
  }
  return absl::string_view::npos;
}

}  // namespace

absl::StatusOr<std::vector<TuningEntry>> ParseTuningTable(absl::string_view text) {
  std::vector<TuningEntry> entries;
  int line_number = 0;
  for (absl::string_view line : absl::StrSplit(text, '\n')) {
    ++line_number;
    absl::ConsumeSuffix(&line, "\r");
    if (line.empty() || absl::StartsWith(line, "#")) continue;
    std::vector<std::string> fields = absl::StrSplit(line, '\t');
    if (fields.size() < 2 || fields.size() > 3 || fields[0].empty() || fields[1].empty()) {
      return absl::InvalidArgumentError(absl::StrCat(
          "tuning table line ", line_number,
          ": expected '<device>\\t<candidate>[\\t<note>]', got '", line, "'"));
    }
    // Fields are text: FormatTuningTable writes them back as they are, and
    // a control character would not survive that (nor match a device).
    for (size_t i = 0; i < fields.size(); ++i) {
      if (const size_t at = FindControlCharacter(fields[i]); at != absl::string_view::npos) {
        return absl::InvalidArgumentError(absl::StrFormat(
            "tuning table line %d: field %d has control character 0x%02x; fields are text "
            "separated by tabs",
            line_number, i + 1, static_cast<unsigned char>(fields[i][at])));
      }
    }
    entries.push_back({fields[0], fields[1], fields.size() == 3 ? fields[2] : ""});
  }
  return entries;
}

std::string FormatTuningTable(const std::vector<TuningEntry>& entries) {
  std::string out =
      "# attnserve tuning table: <device>\\t<k07 candidate>\\t<how it was measured>\n"
      "# Written by attn_tune (bench/attn_tune.cc); read by the library by device name.\n"
      "# Devices without an entry run the built-in default candidate (FA2's 128x64, 4 warps).\n";
  for (const TuningEntry& e : entries) {
    absl::StrAppend(&out, e.device, "\t", e.candidate);
    if (!e.note.empty()) absl::StrAppend(&out, "\t", e.note);
    out += "\n";
  }
  return out;
}

namespace {

std::string FindIn(const std::vector<TuningEntry>& entries, absl::string_view device,
                   absl::string_view step_prefix) {
  // Later lines win, so appending a fresh measurement overrides an old one.
  std::string found;
  for (const TuningEntry& e : entries) {
    if (e.device == device && absl::StartsWith(e.candidate, step_prefix)) found = e.candidate;
  }
  return found;
}

}  // namespace

absl::StatusOr<TuningTables> LoadTuningTables() {
  TuningTables tables;
  if (const char* path = std::getenv("ATTN_TUNING_TABLE"); path != nullptr && *path != '\0') {
    std::ifstream file(path);
    if (!file) {
      return absl::FailedPreconditionError(
          absl::StrCat("ATTN_TUNING_TABLE=", path, ": cannot open the file"));
    }
    std::stringstream text;
    text << file.rdbuf();
    absl::StatusOr<std::vector<TuningEntry>> entries = ParseTuningTable(text.str());
    if (!entries.ok()) {
      return absl::FailedPreconditionError(
          absl::StrCat("ATTN_TUNING_TABLE=", path, ": ", entries.status().message()));
    }
    tables.environment = *std::move(entries);
  }
  absl::StatusOr<std::vector<TuningEntry>> builtin = ParseTuningTable(BuiltinTuningTable());
  if (!builtin.ok()) return builtin.status();
  tables.builtin = *std::move(builtin);
  return tables;
}

std::string FindTunedCandidate(const TuningTables& tables, absl::string_view device_name,
                               absl::string_view step_prefix) {
  if (std::string found = FindIn(tables.environment, device_name, step_prefix); !found.empty()) {
    return found;
  }
  return FindIn(tables.builtin, device_name, step_prefix);
}

absl::StatusOr<std::string> LookupTunedCandidate(absl::string_view device_name,
                                                 absl::string_view step_prefix) {
  absl::StatusOr<TuningTables> tables = LoadTuningTables();
  if (!tables.ok()) return tables.status();
  return FindTunedCandidate(*tables, device_name, step_prefix);
}

}  // namespace attn
