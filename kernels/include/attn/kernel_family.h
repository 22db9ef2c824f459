// attn/kernel_family.h
//
// Kernel families: sets of GPU kernels compiled for the same architectures
// and needing the same hardware (kernels/src/cuda/kernel_table.inc, ATTN_FAMILY
// rows). A kernel can exist in several families; on each device it runs the
// best family that device has. CPU-only builds know the families too, with
// nothing compiled.
#ifndef ATTN_KERNEL_FAMILY_H_
#define ATTN_KERNEL_FAMILY_H_

#include <string>
#include <vector>

#include "absl/types/span.h"
#include "absl/strings/string_view.h"

namespace attn {

struct KernelFamily {
  std::string name;                // e.g. "ampere"
  int min_compute_capability = 0;  // major * 10 + minor: 80 = sm_80
  // Compiled for exactly sm_<min>a (arch-specific features such as wgmma),
  // so it runs only on devices of that capability; else on every device
  // from min_compute_capability up.
  bool arch_specific = false;
  std::string features;       // the PTX features its kernels use
  std::string architectures;  // what this build compiled it for, e.g. "80 86 90"; "" = not built

  bool built() const { return !architectures.empty(); }
  // Whether its code runs on a device of `compute_capability`.
  bool RunsOn(int compute_capability) const;
};

// The families of kernel_table.inc, in its order, built or not.
const std::vector<KernelFamily>& KernelFamilies();

// The family named `name`, or null.
const KernelFamily* FindKernelFamily(absl::string_view name);

// Of `families`, the one a device of `compute_capability` runs best: built,
// runs there, and the highest min_compute_capability among those; null when
// none does.
const KernelFamily* BestFamily(absl::Span<const KernelFamily* const> families,
                               int compute_capability);

}  // namespace attn

#endif  // ATTN_KERNEL_FAMILY_H_
