// The FA2 ladder as a kernel library (attn/ladder.h): the steps and
// candidates of ladder_table.inc, each candidate a GpuKernel in its family
// (src/cuda/gpu_kernel.h); a step runs the candidate tuned for the device,
// from the tuning tables read once per process.
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "attn/attention.h"
#include "attn/kernel_library.h"
#include "attn/ladder.h"
#include "attn/tuning.h"
#include "gpu_kernel.h"
#include "ladder_configs.h"

namespace attn {
namespace fa2 {
namespace {

struct LadderStep {
  int step;
  const char* name;
  const char* description;
};

struct LadderCandidate {
  const char* name;
  int step;
  const char* description;
  std::unique_ptr<const GpuKernel> kernel;
};

template <bool kBuilt, class Cfg>
std::unique_ptr<const GpuKernel> CandidateKernel(absl::string_view family) {
  std::vector<FamilyTiles> families;
  AddRow<kBuilt, Cfg, RowVariants::kLadder>(&families, family);
  return std::make_unique<const GpuKernel>(std::move(families));
}

// ladder_table.inc, expanded twice: the steps, and their candidates.
const std::vector<LadderStep>& Steps() {
  static const std::vector<LadderStep> steps = {
#define ATTN_STEP(step, name, description) {step, name, description},
#define ATTN_KERNEL(name, step, family, config, description)
#include "ladder_table.inc"
#undef ATTN_STEP
#undef ATTN_KERNEL
  };
  return steps;
}

const std::vector<LadderCandidate>& Candidates() {
  static const std::vector<LadderCandidate>* candidates = [] {
    auto* list = new std::vector<LadderCandidate>;
#define ATTN_STEP(step, name, description)
#define ATTN_KERNEL(name, step, family, config, description)                                \
  list->push_back({name, step, description,                                                \
                   CandidateKernel<FamilyBuilt(ATTN_FAMILY_ARCHS_##family), config>(#family)});
#include "ladder_table.inc"
#undef ATTN_STEP
#undef ATTN_KERNEL
    return list;
  }();
  return *candidates;
}

}  // namespace
}  // namespace fa2

namespace ladder {
namespace {

using fa2::LadderCandidate;
using fa2::LadderStep;

const absl::StatusOr<TuningTables>& Tuning() {
  static const absl::StatusOr<TuningTables>* tables =
      new absl::StatusOr<TuningTables>(LoadTuningTables());
  return *tables;
}

// A step's candidates share the prefix of their names up to the '/'
// ("k07/"); a step with one candidate named like the step has none.
std::string StepPrefix(const LadderStep& step) { return absl::StrFormat("k%02d/", step.step); }

// The candidate `step` runs on a device named `device_name` (null: no
// device): the tuning table's entry for (device, step), else the step's
// first candidate.
absl::StatusOr<const LadderCandidate*> ChosenFor(const LadderStep& step,
                                                const std::string* device_name) {
  std::string tuned;
  if (device_name != nullptr) {
    if (!Tuning().ok()) return Tuning().status();
    tuned = FindTunedCandidate(*Tuning(), *device_name, StepPrefix(step));
  }
  const LadderCandidate* first = nullptr;
  for (const LadderCandidate& c : fa2::Candidates()) {
    if (c.step != step.step) continue;
    if (first == nullptr) first = &c;
    if (!tuned.empty() && tuned == c.name) return &c;
  }
  if (!tuned.empty()) {
    return absl::FailedPreconditionError(absl::StrCat(
        "the tuning table names candidate '", tuned, "', which this build does not have"));
  }
  if (first == nullptr) {
    return absl::InternalError(absl::StrCat("step ", step.step, " has no candidate"));
  }
  return first;
}

KernelInfo CandidateBase(const LadderCandidate& c) {
  KernelInfo info;
  info.name = c.name;
  info.ladder_step = c.step;
  info.description = c.description;
  return info;
}

// A step's own name, with the candidate it runs here.
KernelInfo StepBase(const LadderStep& step, const LadderCandidate& chosen) {
  KernelInfo info;
  info.name = step.name;
  info.ladder_step = step.step;
  info.description = step.description;
  if (chosen.name != absl::string_view(step.name)) {
    absl::StrAppend(&info.description, "; here: ", chosen.name, " (", chosen.description, ")");
  }
  return info;
}

bool IsStepName(absl::string_view name) {
  for (const LadderStep& step : fa2::Steps()) {
    if (name == step.name) return true;
  }
  return false;
}

// The name of the calling thread's current device, if one is visible.
std::optional<std::string> CurrentDeviceName() {
  absl::StatusOr<DeviceInfo> device = fa2::CurrentCudaDevice();
  if (!device.ok()) return std::nullopt;
  return device->name;
}

class LadderLibrary : public KernelLibrary {
 public:
  std::vector<KernelInfo> List() const override {
    const std::optional<std::string> device = CurrentDeviceName();
    std::vector<KernelInfo> kernels;
    for (const LadderStep& step : fa2::Steps()) {
      absl::StatusOr<const LadderCandidate*> chosen =
          ChosenFor(step, device.has_value() ? &*device : nullptr);
      if (!chosen.ok()) continue;
      absl::StatusOr<KernelInfo> info = (*chosen)->kernel->Describe(StepBase(step, **chosen));
      if (info.ok()) kernels.push_back(*std::move(info));
    }
    return kernels;
  }

  std::vector<KernelInfo> Candidates() const override {
    std::vector<KernelInfo> kernels;
    for (const LadderCandidate& c : fa2::Candidates()) {
      if (IsStepName(c.name)) continue;
      absl::StatusOr<KernelInfo> info = c.kernel->Describe(CandidateBase(c));
      if (info.ok()) kernels.push_back(*std::move(info));
    }
    return kernels;
  }

  absl::StatusOr<KernelHandle> Resolve(absl::string_view name,
                                       const DeviceInfo* device) const override {
    for (const LadderStep& step : fa2::Steps()) {
      if (name != step.name) continue;
      const std::optional<std::string> device_name =
          device != nullptr ? std::optional<std::string>(device->name) : CurrentDeviceName();
      absl::StatusOr<const LadderCandidate*> chosen =
          ChosenFor(step, device_name.has_value() ? &*device_name : nullptr);
      if (!chosen.ok()) return chosen.status();
      return (*chosen)->kernel->Resolve(StepBase(step, **chosen), device);
    }
    for (const LadderCandidate& c : fa2::Candidates()) {
      if (name == c.name) return c.kernel->Resolve(CandidateBase(c), device);
    }
    return absl::NotFoundError(name);
  }
};

}  // namespace

void Register() {
  static const LadderLibrary* library = new LadderLibrary;
  RegisterKernelLibrary(library);
}

}  // namespace ladder
}  // namespace attn
