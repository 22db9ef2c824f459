#include "attend_command.h"

#include <random>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "attn/client/npy.h"
#include "exit_codes.h"
#include "timing_table.h"

namespace attn::cli {
namespace {

const char* TransportName(bool streamed) { return streamed ? "streamed" : "unary"; }

// Reads the three .npy inputs; they must agree on dtype and shape.
absl::StatusOr<AttentionInputs> LoadInputs(const AttendCommandOptions& options) {
  AttentionInputs inputs;
  const std::pair<const std::string*, std::string*> files[] = {
      {&options.q_path, &inputs.q}, {&options.k_path, &inputs.k}, {&options.v_path, &inputs.v}};
  std::optional<DType> dtype = options.dtype;
  bool first = true;
  for (const auto& [path, bytes] : files) {
    absl::StatusOr<NpyTensor> tensor = ReadTensorNpy(*path, dtype);
    if (!tensor.ok()) return tensor.status();
    if (first) {
      inputs.dtype = tensor->dtype;
      inputs.shape = tensor->shape;
      dtype = tensor->dtype;
      first = false;
    } else if (tensor->shape != inputs.shape) {
      return absl::InvalidArgumentError(absl::StrCat(*path, ": shape ", tensor->shape.ToString(),
                                                     " differs from q's ",
                                                     inputs.shape.ToString()));
    }
    *bytes = std::move(tensor->bytes);
  }
  return inputs;
}

std::string Mib(int64_t bytes) {
  return absl::StrFormat("%.2f MiB", static_cast<double>(bytes) / (1 << 20));
}

}  // namespace

int RunAttend(AttentionClient& client, const AttendCommandOptions& options, std::ostream& out,
              std::ostream& err) {
  const bool from_files =
      !options.q_path.empty() || !options.k_path.empty() || !options.v_path.empty();
  if (from_files &&
      (options.q_path.empty() || options.k_path.empty() || options.v_path.empty())) {
    err << "attend: give all of --q, --k and --v, or none for random inputs\n";
    return kExitUsage;
  }
  if (options.repeat < 1) {
    err << "attend: --repeat must be >= 1\n";
    return kExitUsage;
  }

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
    const uint64_t seed = options.seed.has_value() ? *options.seed : std::random_device()();
    const Shape& shape = options.shape;
    if (shape.batch < 1 || shape.seq_len < 1 || shape.num_heads < 1 || shape.head_dim < 1) {
      err << "attend: --shape " << shape.ToString() << ": every dimension must be >= 1\n";
      return kExitUsage;
    }
    inputs = MakeRandomInputs(options.shape, options.dtype.value_or(DType::kBFloat16), seed);
    source = absl::StrCat("random N(0,1), --seed=", seed);
  }
  out << "attend: " << DTypeName(inputs.dtype) << " " << inputs.shape.ToString() << " ("
      << source << ") at " << client.options().address << "\n";

  std::vector<AttendResult> results;
  for (int i = 0; i < options.repeat; ++i) {
    absl::StatusOr<AttendResult> result = client.Attend(inputs, options.call);
    if (!result.ok()) {
      err << "attend: " << result.status().ToString() << "\n";
      return kExitFailure;
    }
    // Only the last output is used; earlier ones would only hold memory.
    if (!results.empty()) std::string().swap(results.back().out);
    results.push_back(*std::move(result));
  }
  const AttendResult& last = results.back();
  out << "  kernel " << last.kernel << " on " << last.backend << " (" << last.device
      << "), request " << last.request_id << ", " << TransportName(last.client.streamed)
      << ", " << Mib(3 * inputs.TensorBytes()) << " in, " << Mib(inputs.TensorBytes())
      << " out\n";
  out << FormatTimingTable(results) << FormatThroughput(results);

  if (!options.out_path.empty()) {
    const absl::Status written =
        WriteTensorNpy(options.out_path, last.dtype, last.shape, last.out);
    if (!written.ok()) {
      err << "attend: " << written.message() << "\n";
      return kExitFailure;
    }
    out << "  wrote " << options.out_path << " (" << DTypeName(last.dtype) << ", "
        << (last.dtype == DType::kFloat16 ? "'<f2'" : "'<V2', view as ml_dtypes.bfloat16")
        << ")\n";
  }

  if (options.check) {
    const CheckResult check =
        CheckAgainstReference(inputs, options.call.softmax_scale.value_or(0.0f), last.out,
                              /*threads=*/0, options.check_rows);
    const bool pass = check.non_finite == 0 && check.relative_l2_error <= options.tolerance;
    const bool sampled = options.check_rows > 0 && options.check_rows < inputs.shape.seq_len;
    out << absl::StrFormat(
        "  check: relative L2 error %.3e, max abs error %.3e, %d non-finite, vs float64 "
        "reference on %s (tolerance %.1e): %s\n",
        check.relative_l2_error, check.max_abs_error, check.non_finite,
        sampled ? absl::StrFormat("%d of %d query rows per head", options.check_rows,
                                  inputs.shape.seq_len)
                : std::string("every element"),
        options.tolerance, pass ? "PASS" : "FAIL");
    if (!pass) return kExitCheckFailed;
  }
  return kExitOk;
}

}  // namespace attn::cli
