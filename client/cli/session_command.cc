#include "session_command.h"

#include <algorithm>
#include <random>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_format.h"
#include "absl/time/clock.h"
#include "exit_codes.h"
#include "session_model.h"

namespace attn::cli {
namespace {

namespace pb = ::attnserve::v1;

double Percentile(std::vector<double> values, double p) {
  if (values.empty()) return 0;
  std::sort(values.begin(), values.end());
  const size_t at = static_cast<size_t>(p * static_cast<double>(values.size() - 1) + 0.5);
  return values[std::min(at, values.size() - 1)];
}

// One independent batch: its sessions, its model (the random tokens and,
// with --check, the float64 reference) and what its calls measured. Only
// its own thread touches it while the steps run.
struct Batch {
  explicit Batch(uint32_t seed) : model(seed) {}
  tools::SessionModel model;
  std::vector<std::string> ids;
  std::vector<double> prefill_ms, decode_ms, decode_kernel_ms;
  int64_t decode_wire_bytes = 0;
  double worst = 0;
  std::string backend;
  absl::Status status;
};

// Steps `batch` through `steps` (tokens per session per step) on every
// layer, one AttendSessions call per layer; stops at the first failure.
void RunSteps(AttentionClient& client, const SessionCommandOptions& o,
              const std::vector<int64_t>& steps, bool decoding, Batch& batch) {
  for (size_t s = 0; s < steps.size() && batch.status.ok(); ++s) {
    for (int64_t layer = 0; layer < o.layers; ++layer) {
      std::vector<std::pair<std::string, int64_t>> entries;
      for (const std::string& id : batch.ids) entries.emplace_back(id, steps[s]);
      pb::AttendSessionsRequest request = batch.model.NewStep(layer, entries);
      request.set_return_lse(o.check);
      const int64_t request_bytes =
          static_cast<int64_t>(request.q().size() + request.k().size() + request.v().size());
      // The check needs the request after the call; otherwise it moves in
      // (a 64-session prefill chunk is ~100 MB).
      const absl::Time start = absl::Now();
      absl::StatusOr<pb::AttendSessionsResponse> response =
          client.AttendSessions(o.check ? request : std::move(request));
      const double ms = absl::ToDoubleMilliseconds(absl::Now() - start);
      if (!response.ok()) {
        batch.status = absl::Status(
            response.status().code(),
            absl::StrFormat("%s step %d layer %d: %s", decoding ? "decode" : "prefill", s, layer,
                            response.status().message()));
        return;
      }
      batch.backend = response->backend();
      if (decoding) {
        batch.decode_ms.push_back(ms);
        batch.decode_kernel_ms.push_back(static_cast<double>(response->timing().kernel_ns()) *
                                         1e-6);
        batch.decode_wire_bytes += request_bytes + static_cast<int64_t>(response->out().size());
      } else {
        batch.prefill_ms.push_back(ms);
      }
      if (o.check) batch.worst = std::max(batch.worst, batch.model.Check(request, *response));
    }
  }
}

// Runs every batch's `steps` at once, a thread per batch; the wall time.
double RunBatches(AttentionClient& client, const SessionCommandOptions& o,
                  const std::vector<int64_t>& steps, bool decoding, std::vector<Batch>& batches) {
  const absl::Time start = absl::Now();
  std::vector<std::thread> threads;
  for (Batch& batch : batches) {
    threads.emplace_back([&, b = &batch] { RunSteps(client, o, steps, decoding, *b); });
  }
  for (std::thread& t : threads) t.join();
  return absl::ToDoubleSeconds(absl::Now() - start);
}

// Prints each failed batch's status; true when one failed.
bool ReportFailures(const std::vector<Batch>& batches, std::ostream& err) {
  bool failed = false;
  for (const Batch& batch : batches) {
    if (!batch.status.ok()) {
      err << "session: " << batch.status << "\n";
      failed = true;
    }
  }
  return failed;
}

}  // namespace

int RunSession(AttentionClient& client, const SessionCommandOptions& o, std::ostream& out,
               std::ostream& err) {
  const uint64_t seed = o.seed.has_value() ? *o.seed : std::random_device()();
  pb::SessionConfig config;
  config.set_dtype(pb::DTYPE_BFLOAT16);
  config.set_num_layers(static_cast<int32_t>(o.layers));
  config.set_num_heads(static_cast<int32_t>(o.heads));
  config.set_kv_num_heads(static_cast<int32_t>(o.kv_heads));
  config.set_head_dim(static_cast<int32_t>(o.head_dim));
  config.set_max_tokens(o.prompt + o.generate);
  // Sessions dealt over the batches in consecutive blocks, in the order
  // they are opened (a server that keeps sessions in slots of one tensor,
  // as bench/peers/torch_session_server.py does, then sees each batch as
  // one range of slots).
  std::vector<Batch> batches;
  for (int64_t b = 0; b < o.batches; ++b) batches.emplace_back(static_cast<uint32_t>(seed + b));
  auto close_all = [&]() {
    for (const Batch& batch : batches) {
      for (const std::string& id : batch.ids) (void)client.CloseSession(id);
    }
  };
  for (int64_t i = 0; i < o.sessions; ++i) {
    absl::StatusOr<pb::SessionInfo> info = client.OpenSession(config);
    if (!info.ok()) {
      err << "session: " << info.status() << "\n";
      close_all();
      return kExitFailure;
    }
    Batch& batch = batches[static_cast<size_t>(i * o.batches / o.sessions)];
    batch.ids.push_back(info->session_id());
    batch.model.Add(batch.ids.back(), {o.layers, o.heads, o.kv_heads, o.head_dim});
  }
  // Prefill chunks, then decode steps; every batch finishes its prefill
  // before any decodes, so the decode phase's wall time is theirs alone.
  std::vector<int64_t> chunks;
  for (int64_t done = 0; done < o.prompt; done += o.chunk) {
    chunks.push_back(std::min(o.chunk, o.prompt - done));
  }
  RunBatches(client, o, chunks, false, batches);
  double decode_s = 0;
  bool failed = ReportFailures(batches, err);
  if (!failed) {
    decode_s = RunBatches(client, o, std::vector<int64_t>(static_cast<size_t>(o.generate), 1),
                          true, batches);
    failed = ReportFailures(batches, err);
  }
  close_all();
  if (failed) return kExitFailure;
  std::vector<double> prefill_ms, decode_ms, decode_kernel_ms;
  int64_t decode_wire_bytes = 0;
  double worst = 0;
  std::string backend;
  for (const Batch& batch : batches) {
    prefill_ms.insert(prefill_ms.end(), batch.prefill_ms.begin(), batch.prefill_ms.end());
    decode_ms.insert(decode_ms.end(), batch.decode_ms.begin(), batch.decode_ms.end());
    decode_kernel_ms.insert(decode_kernel_ms.end(), batch.decode_kernel_ms.begin(),
                            batch.decode_kernel_ms.end());
    decode_wire_bytes += batch.decode_wire_bytes;
    worst = std::max(worst, batch.worst);
    if (!batch.backend.empty()) backend = batch.backend;
  }

  const int64_t generated = o.sessions * o.generate;
  out << absl::StrFormat(
      "session: %d sessions in %d batch(es) in flight, %d layers, heads %d/%d, head_dim %d, "
      "bf16; prompt %d (chunks of %d), %d generated; backend %s; random tokens --seed=%d\n",
      o.sessions, o.batches, o.layers, o.heads, o.kv_heads, o.head_dim, o.prompt, o.chunk,
      o.generate, backend, seed);
  out << absl::StrFormat("  prefill: %d calls, median %.3f ms\n", prefill_ms.size(),
                         Percentile(prefill_ms, 0.5));
  if (generated > 0) {
    out << absl::StrFormat(
        "  decode:  %d calls, p50 %.3f ms, p99 %.3f ms, p99.9 %.3f ms (server kernel p50 %.3f "
        "ms), %.1f tokens/s over %.3f s%s, %d wire bytes per generated token\n",
        decode_ms.size(), Percentile(decode_ms, 0.5), Percentile(decode_ms, 0.99),
        Percentile(decode_ms, 0.999), Percentile(decode_kernel_ms, 0.5),
        decode_s > 0 ? static_cast<double>(generated) / decode_s : 0.0, decode_s,
        o.check ? " (the check's time included)" : "", decode_wire_bytes / generated);
  }
  if (!o.check) return kExitOk;
  const bool ok = worst <= o.tolerance;
  out << absl::StrFormat("  check: every output against float64, max abs error %.3g "
                         "(tolerance %.3g): %s\n",
                         worst, o.tolerance, ok ? "ok" : "FAILED");
  return ok ? kExitOk : kExitCheckFailed;
}

}  // namespace attn::cli
