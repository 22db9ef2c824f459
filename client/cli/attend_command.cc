#include "attend_command.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <optional>
#include <random>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "attn/client/npy.h"
#include "exit_codes.h"
#include "system_shared_memory.h"
#include "timing_table.h"

namespace attn::cli {
namespace {

// "streamed", "unary", or "unary, split into N shards" (one a connection).
std::string TransportName(const ClientTiming& client) {
  if (client.streamed) return "streamed";
  if (client.shards > 1) return absl::StrCat("unary, split into ", client.shards, " shards");
  return "unary";
}

// Reads the three .npy inputs: q [B, Sq, Hq, D], k and v [B, Skv, Hkv, D]
// (varlen: 3-D [total, H, D], split by the options' offsets).
absl::StatusOr<AttentionInputs> LoadInputs(const AttendCommandOptions& options) {
  const bool varlen = !options.cu_seqlens_q.empty();
  AttentionInputs inputs;
  std::optional<DType> dtype = options.dtype;
  NpyTensor tensors[3];
  const std::string* paths[] = {&options.q_path, &options.k_path, &options.v_path};
  for (int i = 0; i < 3; ++i) {
    absl::StatusOr<NpyTensor> tensor = ReadTensorNpy(*paths[i], dtype, /*allow_packed=*/varlen);
    if (!tensor.ok()) return tensor.status();
    dtype = tensor->dtype;
    tensors[i] = *std::move(tensor);
  }
  const Shape& q = tensors[0].shape;
  const Shape& k = tensors[1].shape;
  if (tensors[2].shape != k) {
    return absl::InvalidArgumentError(absl::StrCat(options.v_path, ": shape ",
                                                   tensors[2].shape.ToString(),
                                                   " differs from k's ", k.ToString()));
  }
  if (k.batch != q.batch || k.head_dim != q.head_dim) {
    return absl::InvalidArgumentError(absl::StrCat(options.k_path, ": shape ", k.ToString(),
                                                   " does not go with q's ", q.ToString(),
                                                   " (batch and head_dim must agree)"));
  }
  inputs.dtype = tensors[0].dtype;
  if (varlen) {
    if (q.batch != 1) {
      return absl::InvalidArgumentError(absl::StrCat(
          options.q_path, ": varlen inputs are packed [total_tokens, num_heads, head_dim]"));
    }
    inputs.cu_seqlens_q = options.cu_seqlens_q;
    inputs.cu_seqlens_k = options.cu_seqlens_k;
    inputs.shape =
        Shape{static_cast<int64_t>(options.cu_seqlens_q.size()) - 1, 0, q.num_heads, q.head_dim};
    inputs.shape.seq_len = inputs.SeqLenQ();
    inputs.kv_seq_len = inputs.SeqLenKv();
  } else {
    inputs.shape = q;
    if (k.seq_len != q.seq_len) inputs.kv_seq_len = k.seq_len;
  }
  if (k.num_heads != q.num_heads) inputs.kv_num_heads = k.num_heads;
  inputs.q = std::move(tensors[0].bytes);
  inputs.k = std::move(tensors[1].bytes);
  inputs.v = std::move(tensors[2].bytes);
  return inputs;
}

// The geometry of random inputs from --shape, --kv_shape and the offsets.
absl::StatusOr<AttentionInputs> RandomGeometry(const AttendCommandOptions& options) {
  return MakeGeometry(options.shape, options.dtype.value_or(DType::kBFloat16), options.kv_shape,
                      options.cu_seqlens_q, options.cu_seqlens_k);
}

bool UsesBreadth(const AttentionInputs& inputs, const AttendOptions& call) {
  return !inputs.IsSelfAttentionShape() || call.causal || call.window_left != -1 ||
         call.window_right != -1 || call.return_lse;
}

// "[B, H, S]" or, with varlen, "[H, total_q]": the LSE's dimensions.
std::vector<int64_t> LseDims(const AttentionInputs& inputs) {
  if (inputs.varlen()) return {inputs.shape.num_heads, inputs.TokensQ()};
  return {inputs.shape.batch, inputs.shape.num_heads, inputs.shape.seq_len};
}

std::string LseSummary(const std::vector<float>& lse, const std::vector<int64_t>& dims) {
  int64_t empty_rows = 0;
  float lo = std::numeric_limits<float>::infinity(), hi = -lo;
  for (float x : lse) {
    if (std::isinf(x) && x < 0) {
      ++empty_rows;
      continue;
    }
    lo = std::min(lo, x);
    hi = std::max(hi, x);
  }
  std::string first;
  for (size_t i = 0; i < std::min<size_t>(lse.size(), 4); ++i) {
    absl::StrAppendFormat(&first, " %.4f", lse[i]);
  }
  return absl::StrFormat(
      "  lse: float32 [%s], min %.4f, max %.4f, %d rows with no key (-inf); "
      "first:%s\n",
      absl::StrJoin(dims, ", "), lo, hi, empty_rows, first);
}

std::string Mib(int64_t bytes) {
  return absl::StrFormat("%.2f MiB", static_cast<double>(bytes) / (1 << 20));
}

}  // namespace

int RunAttend(AttentionClient& client, const AttendCommandOptions& options, std::ostream& out,
              std::ostream& err) {
  const bool from_files =
      !options.q_path.empty() || !options.k_path.empty() || !options.v_path.empty();
  if (from_files && (options.q_path.empty() || options.k_path.empty() || options.v_path.empty())) {
    err << "attend: give all of --q, --k and --v, or none for random inputs\n";
    return kExitUsage;
  }
  if (options.repeat < 1) {
    err << "attend: --repeat must be >= 1\n";
    return kExitUsage;
  }
  if (options.cu_seqlens_q.empty() != options.cu_seqlens_k.empty()) {
    err << "attend: give both --cu_seqlens_q and --cu_seqlens_k (varlen), or neither\n";
    return kExitUsage;
  }
  AttendOptions call = options.call;
  if (!options.lse_out_path.empty()) call.return_lse = true;

  AttentionInputs inputs;
  std::string source;
  if (from_files) {
    absl::StatusOr<AttentionInputs> loaded = LoadInputs(options);
    if (!loaded.ok()) {
      err << "attend: " << loaded.status().message() << "\n";
      return kExitFailure;
    }
    inputs = *std::move(loaded);
    source = absl::StrCat("from ", options.q_path, ", ", options.k_path, ", ", options.v_path);
  } else {
    absl::StatusOr<AttentionInputs> geometry = RandomGeometry(options);
    if (!geometry.ok()) {
      err << "attend: " << geometry.status().message() << "\n";
      return kExitUsage;
    }
    // Before drawing the inputs, which takes a minute for a GiB.
    if (absl::Status fits = client.CheckServerLimits(*geometry); !fits.ok()) {
      err << "attend: " << fits.ToString() << "\n";
      return kExitFailure;
    }
    const uint64_t seed = options.seed.has_value() ? *options.seed : std::random_device()();
    inputs = MakeRandomInputs(*std::move(geometry), seed);
    source = absl::StrCat("random N(0,1), --seed=", seed);
  }
  if (absl::Status valid = inputs.Validate(); !valid.ok()) {
    err << "attend: " << valid.message() << "\n";
    return from_files ? kExitFailure : kExitUsage;
  }
  out << "attend: " << DTypeName(inputs.dtype) << " " << inputs.shape.ToString() << " (" << source
      << ") at " << client.options().address << "\n";
  if (UsesBreadth(inputs, call)) out << "  problem " << inputs.Problem(call).ToString() << "\n";

  std::optional<SystemShmCall> shm;
  if (options.system_shared_memory) {
    absl::StatusOr<SystemShmCall> placed = PlaceInSystemSharedMemory(client, inputs, call);
    if (!placed.ok()) {
      err << "attend: --shared_memory=system: " << placed.status().ToString() << "\n";
      return kExitFailure;
    }
    shm = *std::move(placed);
    out << "  shared memory: " << Describe(*shm) << "\n";
  }
  const AttentionInputs& sent = shm.has_value() ? shm->inputs : inputs;
  const AttendOptions& sent_call = shm.has_value() ? shm->options : call;

  std::vector<AttendResult> results;
  for (int i = 0; i < options.repeat; ++i) {
    absl::StatusOr<AttendResult> result = client.Attend(sent, sent_call);
    if (!result.ok()) {
      err << "attend: " << result.status().ToString() << "\n";
      return kExitFailure;
    }
    // Only the last output is used; earlier ones would only hold memory.
    if (!results.empty()) std::string().swap(results.back().out);
    results.push_back(*std::move(result));
  }
  if (shm.has_value()) TakeOutputs(*shm, &results.back());
  const AttendResult& last = results.back();
  const int64_t out_bytes = inputs.QBytes() + (call.return_lse ? inputs.LseElements() * 4 : 0);
  out << "  kernel " << last.kernel << " on " << last.backend << " (" << last.device
      << "), request " << last.request_id << ", " << TransportName(last.client) << ", "
      << Mib(inputs.InputBytes()) << " in, " << Mib(out_bytes) << " out\n";
  out << FormatTimingTable(results) << FormatTensorPaths(last.server)
      << FormatThroughput(results, inputs.Flops(call),
                          static_cast<double>(inputs.InputBytes() + out_bytes));
  if (call.return_lse) out << LseSummary(last.lse, LseDims(inputs));

  if (!options.out_path.empty()) {
    const std::vector<int64_t> dims =
        inputs.varlen()
            ? std::vector<int64_t>{inputs.TokensQ(), inputs.shape.num_heads, inputs.shape.head_dim}
            : std::vector<int64_t>{inputs.shape.batch, inputs.shape.seq_len, inputs.shape.num_heads,
                                   inputs.shape.head_dim};
    const absl::Status written = WriteTensorNpyDims(options.out_path, last.dtype, dims, last.out);
    if (!written.ok()) {
      err << "attend: " << written.message() << "\n";
      return kExitFailure;
    }
    out << "  wrote " << options.out_path << " (" << DTypeName(last.dtype) << ", "
        << (last.dtype == DType::kFloat16 ? "'<f2'" : "'<V2', view as ml_dtypes.bfloat16") << ")\n";
  }
  if (!options.lse_out_path.empty()) {
    const absl::Status written = WriteFloat32Npy(options.lse_out_path, LseDims(inputs), last.lse);
    if (!written.ok()) {
      err << "attend: " << written.message() << "\n";
      return kExitFailure;
    }
    out << "  wrote " << options.lse_out_path << " (lse, float32 '<f4')\n";
  }

  if (options.check) {
    const CheckResult check = CheckAgainstReference(inputs, call, last.out, last.lse,
                                                    /*threads=*/0, options.check_rows);
    const bool lse_ok = !check.lse_checked || (check.lse_mismatched_empty_rows == 0 &&
                                               check.lse_max_abs_error <= options.tolerance);
    const bool pass =
        check.non_finite == 0 && check.relative_l2_error <= options.tolerance && lse_ok;
    const bool sampled = check.rows_checked < check.rows_total;
    std::string lse_part;
    if (check.lse_checked) {
      lse_part = absl::StrFormat(", lse max abs error %.3e (%d rows with -inf on one side only)",
                                 check.lse_max_abs_error, check.lse_mismatched_empty_rows);
    }
    out << absl::StrFormat(
        "  check: relative L2 error %.3e, max abs error %.3e, %d non-finite%s, vs float64 "
        "reference on %s (tolerance %.1e): %s\n",
        check.relative_l2_error, check.max_abs_error, check.non_finite, lse_part,
        !sampled ? std::string("every element")
        : inputs.varlen()
            ? absl::StrFormat("%d of %d query rows (up to %d per sequence and head)",
                              check.rows_checked, check.rows_total, options.check_rows)
            : absl::StrFormat("%d of %d query rows per head", options.check_rows,
                              inputs.shape.seq_len),
        options.tolerance, pass ? "PASS" : "FAIL");
    if (!pass) return kExitCheckFailed;
  }
  return kExitOk;
}

}  // namespace attn::cli
