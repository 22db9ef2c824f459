// Checks a remote attention output (and LSE) against a float64 reference
// computed on this host (attn::AttentionNaiveF64), for `attn_cli attend
// --check`: every feature of the call (kv shape, GQA, causal, window, varlen).
#ifndef ATTN_CLIENT_CLI_REFERENCE_CHECK_H_
#define ATTN_CLIENT_CLI_REFERENCE_CHECK_H_

#include <string>
#include <vector>

#include "attn/client/attend_types.h"

namespace attn::cli {

// Default --tolerance: the relative L2 error the GPU kernel tests accept.
inline constexpr double kDefaultTolerance = 1e-2;

struct CheckResult {
  double relative_l2_error = 0.0;  // ‖out − ref‖₂ / ‖ref‖₂
  double max_abs_error = 0.0;
  int64_t non_finite = 0;  // NaN/Inf elements in `out`
  // With an LSE to check: the largest |lse − ref| over rows that see keys,
  // and the rows where one side is −inf (no visible key) and the other not.
  bool lse_checked = false;
  double lse_max_abs_error = 0.0;
  int64_t lse_mismatched_empty_rows = 0;
  int64_t rows_checked = 0;  // query rows compared, over all (sequence, head) slices
  int64_t rows_total = 0;
};

// Computes the reference from the 16-bit `inputs` (their exact values) for
// the call `options` describes (scale, causal, window), one (sequence, head)
// slice per task on up to `threads` threads (0: all cores), and compares
// `out` to it, and `lse` when it is not empty. `out` (and `lse`) must have
// the sizes the inputs imply.
//
// `rows_per_head` > 0 checks only that many query rows of every (sequence,
// head), evenly spaced and including the first and last: the reference
// costs O(Skv·D) per row instead of O(Sq·Skv·D) per slice, which makes
// --check practical for S in the thousands. Slices with no more rows than
// that (and every slice with 0) are checked whole with
// attn::AttentionNaiveF64.
CheckResult CheckAgainstReference(const AttentionInputs& inputs, const AttendOptions& options,
                                  const std::string& out, const std::vector<float>& lse,
                                  int threads = 0, int64_t rows_per_head = 0);

}  // namespace attn::cli

#endif  // ATTN_CLIENT_CLI_REFERENCE_CHECK_H_
