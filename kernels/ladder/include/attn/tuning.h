// attn/tuning.h
//
// The auto-tuning table of the ladder (attn/ladder.h): which tuning
// candidate a tuned ladder step (7 and later, e.g. "k07_autotuned") runs on
// which GPU, keyed by (device, step). attn_tune writes it; the ladder reads
// it once per process and looks entries up by device name
// (cudaDeviceProp::name, e.g. "NVIDIA H200") and the step's name prefix.
//
// Format, one entry per line, tab-separated, '#' starts a comment line:
//   <device name> TAB <candidate name> [TAB <note: how it was measured>]
// The built-in table is kernels/tuning/tuned_configs.tsv, compiled into the
// ladder; a file named by the environment variable ATTN_TUNING_TABLE is
// consulted first, so a node can carry its own table without a rebuild.
#ifndef ATTN_TUNING_H_
#define ATTN_TUNING_H_

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace attn {

struct TuningEntry {
  std::string device;
  std::string candidate;
  std::string note;
};

// Parses a table; INVALID_ARGUMENT naming the line for malformed lines (not
// two or three fields, an empty device or candidate, a control character).
absl::StatusOr<std::vector<TuningEntry>> ParseTuningTable(absl::string_view text);

// Renders entries in the format ParseTuningTable reads.
std::string FormatTuningTable(const std::vector<TuningEntry>& entries);

// The table compiled into this build.
absl::string_view BuiltinTuningTable();

// The tables a lookup consults: the $ATTN_TUNING_TABLE file's entries (none
// when the variable is unset or empty), then the built-in table's.
struct TuningTables {
  std::vector<TuningEntry> environment;
  std::vector<TuningEntry> builtin;
};

// Reads both tables; FAILED_PRECONDITION when the environment names a file
// that cannot be read or parsed.
absl::StatusOr<TuningTables> LoadTuningTables();

// The candidate tuned for (`device_name`, step): the entry for the device
// whose candidate name starts with `step_prefix` (a step's candidates share
// it: "k07/", "k08/", ...), from the environment's table first, then the
// built-in one; later lines of a table win. "" when neither has one.
std::string FindTunedCandidate(const TuningTables& tables, absl::string_view device_name,
                               absl::string_view step_prefix);

// LoadTuningTables then FindTunedCandidate, reading the files at every call
// (for tools; the ladder loads the tables once per process).
absl::StatusOr<std::string> LookupTunedCandidate(absl::string_view device_name,
                                                 absl::string_view step_prefix);

}  // namespace attn

#endif  // ATTN_TUNING_H_
