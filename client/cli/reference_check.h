// Checks a remote attention output against a float64 reference computed on
// this host (attn::AttentionNaiveF64), for `attn_cli attend --check`.
#ifndef ATTN_CLIENT_CLI_REFERENCE_CHECK_H_
#define ATTN_CLIENT_CLI_REFERENCE_CHECK_H_

#include <string>

#include "attn/client/attend_types.h"

namespace attn::cli {

// Default --tolerance: the relative L2 error the GPU kernel tests accept.
inline constexpr double kDefaultTolerance = 1e-2;

struct CheckResult {
  double relative_l2_error = 0.0;  // ‖out − ref‖₂ / ‖ref‖₂
  double max_abs_error = 0.0;
  int64_t non_finite = 0;  // NaN/Inf elements in `out`
};

// Computes the reference from the 16-bit `inputs` (their exact values) with
// `softmax_scale` (0: 1/sqrt(head_dim)), one (batch, head) slice per task on
// up to `threads` threads (0: all cores), and compares `out` to it. `out`
// must have the inputs' size and dtype.
//
// `rows_per_head` > 0 checks only that many query rows of every (batch,
// head), evenly spaced and including the first and last: the reference
// costs O(S·D) per row instead of O(S²·D) per head, which makes --check
// practical for S in the thousands. 0 checks every row with
// attn::AttentionNaiveF64.
CheckResult CheckAgainstReference(const AttentionInputs& inputs, float softmax_scale,
                                  const std::string& out, int threads = 0,
                                  int64_t rows_per_head = 0);

}  // namespace attn::cli

#endif  // ATTN_CLIENT_CLI_REFERENCE_CHECK_H_
