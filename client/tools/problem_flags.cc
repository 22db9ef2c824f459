#include "problem_flags.h"

#include <string>

#include "absl/flags/flag.h"
#include "absl/status/status.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"

ABSL_FLAG(std::string, kv_shape, "",
          "B,Skv,Hkv,D of K and V (kv_seq_len, kv_num_heads; B and D as in --shape; Hkv must "
          "divide H: grouped-query attention, 1 = multi-query). Empty: --shape.");
ABSL_FLAG(bool, causal, false,
          "Causal mask, aligned to the bottom right when Skv != S (query i sees keys "
          "j <= i + Skv - S), as FlashAttention-2.");
ABSL_FLAG(std::string, window, "-1,-1",
          "Sliding window L,R (FA2's window_size): query i sees keys j with "
          "i + Skv - S - L <= j <= i + Skv - S + R; -1 = unbounded on that side.");
ABSL_FLAG(bool, lse, false, "Also return the log-sum-exp of every query row (float32).");
ABSL_FLAG(std::string, cu_seqlens_q, "",
          "Varlen (packed sequences, as flash_attn_varlen_func): query token offsets "
          "0,l0,l0+l1,... (batch + 1 of them); B and S of --shape then come from them.");
ABSL_FLAG(std::string, cu_seqlens_k, "",
          "Varlen: key/value token offsets, as many as --cu_seqlens_q.");
ABSL_FLAG(std::string, seqlens_q, "",
          "Varlen, as lengths instead of offsets: query tokens of each sequence, l0,l1,...");
ABSL_FLAG(std::string, seqlens_k, "",
          "Varlen: key/value tokens of each sequence; empty: --seqlens_q.");

namespace attn::tools {
namespace {

// "1,2,3" -> {1, 2, 3}; an empty text is an empty list.
absl::Status ParseList(const char* flag, const std::string& text, std::vector<int64_t>* values) {
  values->clear();
  if (text.empty()) return absl::OkStatus();
  for (absl::string_view part : absl::StrSplit(text, ',')) {
    int64_t value;
    if (!absl::SimpleAtoi(part, &value) || value < 0 || value > INT32_MAX) {
      return absl::InvalidArgumentError(absl::StrCat(
          "--", flag, " must be comma-separated integers in [0, 2^31), got '", text, "'"));
    }
    values->push_back(value);
  }
  return absl::OkStatus();
}

std::vector<int32_t> ToInt32(const std::vector<int64_t>& values) {
  return std::vector<int32_t>(values.begin(), values.end());
}

}  // namespace

bool ParseShapeFlag(const std::string& text, Shape* shape) {
  const std::vector<std::string> parts = absl::StrSplit(text, ',');
  int64_t dims[4];
  if (parts.size() != 4) return false;
  for (int i = 0; i < 4; ++i) {
    if (!absl::SimpleAtoi(parts[i], &dims[i])) return false;
  }
  *shape = Shape{dims[0], dims[1], dims[2], dims[3]};
  return true;
}

void ProblemFlagValues::ApplyTo(AttendOptions* options) const {
  options->causal = causal;
  options->window_left = window_left;
  options->window_right = window_right;
  options->return_lse = lse;
}

absl::StatusOr<ProblemFlagValues> ProblemFlagsFromFlags() {
  ProblemFlagValues values;
  if (const std::string kv = absl::GetFlag(FLAGS_kv_shape); !kv.empty()) {
    Shape shape;
    if (!ParseShapeFlag(kv, &shape)) {
      return absl::InvalidArgumentError(
          absl::StrCat("--kv_shape must be B,Skv,Hkv,D (four integers), got '", kv, "'"));
    }
    values.kv_shape = shape;
  }
  const std::string window = absl::GetFlag(FLAGS_window);
  const std::vector<std::string> sides = absl::StrSplit(window, ',');
  if (sides.size() != 2 || !absl::SimpleAtoi(sides[0], &values.window_left) ||
      !absl::SimpleAtoi(sides[1], &values.window_right) || values.window_left < -1 ||
      values.window_right < -1) {
    return absl::InvalidArgumentError(
        absl::StrCat("--window must be L,R (integers >= -1; -1 = unbounded), got '", window, "'"));
  }
  values.causal = absl::GetFlag(FLAGS_causal);
  values.lse = absl::GetFlag(FLAGS_lse);

  std::vector<int64_t> cu_q, cu_k, len_q, len_k;
  if (absl::Status s = ParseList("cu_seqlens_q", absl::GetFlag(FLAGS_cu_seqlens_q), &cu_q); !s.ok())
    return s;
  if (absl::Status s = ParseList("cu_seqlens_k", absl::GetFlag(FLAGS_cu_seqlens_k), &cu_k); !s.ok())
    return s;
  if (absl::Status s = ParseList("seqlens_q", absl::GetFlag(FLAGS_seqlens_q), &len_q); !s.ok())
    return s;
  if (absl::Status s = ParseList("seqlens_k", absl::GetFlag(FLAGS_seqlens_k), &len_k); !s.ok())
    return s;
  if (!len_q.empty() || !len_k.empty()) {
    if (!cu_q.empty() || !cu_k.empty()) {
      return absl::InvalidArgumentError("give --seqlens_q/_k or --cu_seqlens_q/_k, not both");
    }
    if (len_q.empty()) return absl::InvalidArgumentError("--seqlens_k needs --seqlens_q");
    if (len_k.empty()) len_k = len_q;
    if (len_k.size() != len_q.size()) {
      return absl::InvalidArgumentError(
          absl::StrCat("--seqlens_k has ", len_k.size(), " sequences, --seqlens_q ", len_q.size()));
    }
    values.cu_seqlens_q = CumulativeSeqlens(len_q);
    values.cu_seqlens_k = CumulativeSeqlens(len_k);
    return values;
  }
  if (cu_q.empty() != cu_k.empty()) {
    return absl::InvalidArgumentError(
        "give both --cu_seqlens_q and --cu_seqlens_k (varlen), or neither");
  }
  values.cu_seqlens_q = ToInt32(cu_q);
  values.cu_seqlens_k = ToInt32(cu_k);
  return values;
}

}  // namespace attn::tools
