#include "session_command.h"

#include <algorithm>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_format.h"
#include "absl/time/clock.h"
#include "exit_codes.h"
#include "session_model.h"

namespace attn::cli {
namespace {

namespace pb = ::attnserve::v1;

double Median(std::vector<double> values) {
  if (values.empty()) return 0;
  std::sort(values.begin(), values.end());
  return values[values.size() / 2];
}

}  // namespace

int RunSession(AttentionClient& client, const SessionCommandOptions& o, std::ostream& out,
               std::ostream& err) {
  const uint64_t seed = o.seed.has_value() ? *o.seed : std::random_device()();
  tools::SessionModel model(static_cast<uint32_t>(seed));
  pb::SessionConfig config;
  config.set_dtype(pb::DTYPE_BFLOAT16);
  config.set_num_layers(static_cast<int32_t>(o.layers));
  config.set_num_heads(static_cast<int32_t>(o.heads));
  config.set_kv_num_heads(static_cast<int32_t>(o.kv_heads));
  config.set_head_dim(static_cast<int32_t>(o.head_dim));
  config.set_max_tokens(o.prompt + o.generate);
  std::vector<std::string> ids;
  auto close_all = [&]() {
    for (const std::string& id : ids) (void)client.CloseSession(id);
  };
  for (int64_t i = 0; i < o.sessions; ++i) {
    absl::StatusOr<pb::SessionInfo> info = client.OpenSession(config);
    if (!info.ok()) {
      err << "session: " << info.status() << "\n";
      close_all();
      return kExitFailure;
    }
    ids.push_back(info->session_id());
    model.Add(ids.back(), {o.layers, o.heads, o.kv_heads, o.head_dim});
  }
  // Prefill chunks, then decode steps, each one call per layer for all sessions.
  std::vector<int64_t> steps;
  for (int64_t done = 0; done < o.prompt; done += o.chunk) {
    steps.push_back(std::min(o.chunk, o.prompt - done));
  }
  const size_t prefill_steps = steps.size();
  steps.insert(steps.end(), static_cast<size_t>(o.generate), 1);

  std::vector<double> prefill_ms, decode_ms, decode_kernel_ms;
  int64_t decode_wire_bytes = 0;
  double worst = 0;
  std::string backend;
  for (size_t s = 0; s < steps.size(); ++s) {
    const bool decoding = s >= prefill_steps;
    for (int64_t layer = 0; layer < o.layers; ++layer) {
      std::vector<std::pair<std::string, int64_t>> entries;
      for (const std::string& id : ids) entries.emplace_back(id, steps[s]);
      pb::AttendSessionsRequest request = model.NewStep(layer, entries);
      request.set_return_lse(o.check);
      const absl::Time start = absl::Now();
      absl::StatusOr<pb::AttendSessionsResponse> response = client.AttendSessions(request);
      const double ms = absl::ToDoubleMilliseconds(absl::Now() - start);
      if (!response.ok()) {
        err << "session: step " << s << " layer " << layer << ": " << response.status() << "\n";
        close_all();
        return kExitFailure;
      }
      backend = response->backend();
      if (decoding) {
        decode_ms.push_back(ms);
        decode_kernel_ms.push_back(static_cast<double>(response->timing().kernel_ns()) * 1e-6);
        decode_wire_bytes += static_cast<int64_t>(request.q().size() + request.k().size() +
                                                  request.v().size() + response->out().size());
      } else {
        prefill_ms.push_back(ms);
      }
      if (o.check) worst = std::max(worst, model.Check(request, *response));
    }
  }
  // Tokens/s over the decode calls' own time (the check is not timed).
  double decode_s = 0;
  for (double ms : decode_ms) decode_s += ms * 1e-3;
  close_all();

  const int64_t generated = o.sessions * o.generate;
  out << absl::StrFormat(
      "session: %d sessions, %d layers, heads %d/%d, head_dim %d, bf16; prompt %d (chunks of "
      "%d), %d generated; backend %s; random tokens --seed=%d\n",
      o.sessions, o.layers, o.heads, o.kv_heads, o.head_dim, o.prompt, o.chunk, o.generate,
      backend, seed);
  out << absl::StrFormat("  prefill: %d calls, median %.3f ms\n", prefill_ms.size(),
                         Median(prefill_ms));
  if (generated > 0) {
    out << absl::StrFormat(
        "  decode:  %d calls, median %.3f ms (server kernel %.3f ms), %.1f tokens/s, %d wire "
        "bytes per generated token\n",
        decode_ms.size(), Median(decode_ms), Median(decode_kernel_ms),
        decode_s > 0 ? static_cast<double>(generated) / decode_s : 0.0,
        decode_wire_bytes / generated);
  }
  if (!o.check) return kExitOk;
  const bool ok = worst <= o.tolerance;
  out << absl::StrFormat("  check: every output against float64, max abs error %.3g "
                         "(tolerance %.3g): %s\n",
                         worst, o.tolerance, ok ? "ok" : "FAILED");
  return ok ? kExitOk : kExitCheckFailed;
}

}  // namespace attn::cli
