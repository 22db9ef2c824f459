#include "core/worker_fault_spec.h"

#include <algorithm>

#include "absl/status/status.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"

namespace attn::server {

absl::StatusOr<std::vector<WorkerFault>> ParseWorkerFaults(absl::string_view spec) {
  std::vector<WorkerFault> faults;
  if (spec.empty()) return faults;
  for (absl::string_view pair : absl::StrSplit(spec, ',')) {
    const std::vector<absl::string_view> parts = absl::StrSplit(pair, ':');
    WorkerFault fault;
    if (parts.size() != 2 || !absl::SimpleAtoi(parts[0], &fault.worker) ||
        !absl::SimpleAtoi(parts[1], &fault.good_jobs) || fault.worker < 0 || fault.good_jobs < 0) {
      return absl::InvalidArgumentError(absl::StrCat(
          kWorkerFaultFlag, ": '", pair,
          "' is not WORKER:GOOD_JOBS (two non-negative integers, e.g. \"1:0\": worker 1 "
          "fails its first job); pairs are separated by commas"));
    }
    if (std::any_of(faults.begin(), faults.end(),
                    [&](const WorkerFault& f) { return f.worker == fault.worker; })) {
      return absl::InvalidArgumentError(
          absl::StrCat(kWorkerFaultFlag, " names worker ", fault.worker, " twice"));
    }
    faults.push_back(fault);
  }
  return faults;
}

std::string FormatWorkerFaults(const std::vector<WorkerFault>& faults) {
  return absl::StrJoin(faults, ",", [](std::string* out, const WorkerFault& f) {
    absl::StrAppend(out, f.worker, ":", f.good_jobs);
  });
}

}  // namespace attn::server
