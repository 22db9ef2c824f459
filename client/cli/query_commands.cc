#include "query_commands.h"

#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "exit_codes.h"
#include "google/protobuf/util/json_util.h"

namespace attn::cli {
namespace {

namespace pb = ::attnserve::v1;

int PrintJson(const google::protobuf::Message& message, std::ostream& out, std::ostream& err) {
  google::protobuf::util::JsonPrintOptions options;
  options.add_whitespace = true;
  options.always_print_primitive_fields = true;
  options.preserve_proto_field_names = true;
  std::string json;
  if (const auto status = google::protobuf::util::MessageToJsonString(message, &json, options);
      !status.ok()) {
    err << "cannot print JSON: " << status.ToString() << "\n";
    return kExitFailure;
  }
  out << json;
  return kExitOk;
}

std::string Mib(int64_t bytes) {
  return absl::StrFormat("%.1f MiB", static_cast<double>(bytes) / (1 << 20));
}

double AverageMs(int64_t sum_ns, int64_t count) {
  return count > 0 ? static_cast<double>(sum_ns) / static_cast<double>(count) / 1e6 : 0.0;
}

// What a kernel accepts beyond non-causal self-attention, e.g.
// "causal,window,gqa,kv_len,lse,varlen sm>=80"; "-" for none.
std::string KernelFeatures(const pb::KernelDescriptor& k) {
  std::vector<std::string> features;
  if (k.causal()) features.push_back("causal");
  if (k.window()) features.push_back("window");
  if (k.gqa()) features.push_back("gqa");
  if (k.kv_seq_len_differs()) features.push_back("kv_len");
  if (k.lse()) features.push_back("lse");
  if (k.varlen()) features.push_back("varlen");
  std::string text = features.empty() ? std::string("-") : absl::StrJoin(features, ",");
  if (k.min_compute_capability() > 0) absl::StrAppend(&text, " sm>=", k.min_compute_capability());
  return text;
}

}  // namespace

int RunKernels(AttentionClient& client, bool json, std::ostream& out, std::ostream& err) {
  absl::StatusOr<pb::ListKernelsResponse> kernels = client.ListKernels();
  if (!kernels.ok()) {
    err << "kernels: " << kernels.status().ToString() << "\n";
    return kExitFailure;
  }
  if (json) return PrintJson(*kernels, out, err);
  out << absl::StrFormat("%-4s %-22s %-7s %-14s %-7s %-9s %-5s %-36s %s\n", "step", "name",
                         "backend", "head_dim", "seq_mul", "tile", "warps", "features",
                         "description");
  for (const pb::KernelDescriptor& k : kernels->kernels()) {
    const std::string head_dim = !k.head_dims().empty() ? absl::StrJoin(k.head_dims(), "/")
                                 : k.head_dim() > 0     ? absl::StrCat(k.head_dim())
                                                        : absl::StrCat("<=", k.max_head_dim());
    const std::string tile =
        k.block_m() > 0 ? absl::StrCat(k.block_m(), "x", k.block_n()) : std::string("-");
    out << absl::StrFormat("%-4d %-22s %-7s %-14s %-7d %-9s %-5s %-36s %s%s\n", k.ladder_step(),
                           k.name(), k.backend(), head_dim, k.seq_multiple(), tile,
                           k.num_warps() > 0 ? absl::StrCat(k.num_warps()) : std::string("-"),
                           KernelFeatures(k), k.description(), k.is_default() ? " [default]" : "");
  }
  return kExitOk;
}

int RunInfo(AttentionClient& client, bool json, std::ostream& out, std::ostream& err) {
  absl::StatusOr<pb::ServerInfo> info = client.GetServerInfo();
  if (!info.ok()) {
    err << "info: " << info.status().ToString() << "\n";
    return kExitFailure;
  }
  if (json) return PrintJson(*info, out, err);
  std::vector<std::string> dtypes;
  for (int dtype : info->dtypes()) dtypes.push_back(pb::DType_Name(static_cast<pb::DType>(dtype)));
  out << "server:          " << client.options().address << "\n"
      << "version:         " << info->version() << "\n"
      << "backend:         " << info->backend() << "\n"
      << "default kernel:  " << info->default_kernel() << "\n"
      << "dtypes:          " << absl::StrJoin(dtypes, ", ") << "\n"
      << "build:           " << info->build() << "\n";
  if (info->devices().empty()) out << "devices:         (none)\n";
  for (const pb::DeviceDescriptor& d : info->devices()) {
    out << absl::StrFormat("device %d:        %s, sm_%d%d, %d SMs, %.1f GiB\n", d.ordinal(),
                           d.name(), d.compute_major(), d.compute_minor(), d.multiprocessors(),
                           static_cast<double>(d.total_memory_bytes()) / (1 << 30));
  }
  const pb::ServerLimits& limits = info->limits();
  out << "limits:          max message " << Mib(limits.max_message_bytes()) << ", max request "
      << Mib(limits.max_request_bytes()) << ", max tokens/tensor "
      << limits.max_tokens_per_request() << ", queue " << limits.queue_capacity() << ", workers "
      << limits.workers() << "\n"
      << "client streams requests above " << Mib(client.stream_threshold_bytes()) << "\n";
  return kExitOk;
}

int RunStats(AttentionClient& client, bool json, std::ostream& out, std::ostream& err) {
  absl::StatusOr<pb::ServerStats> stats = client.GetStats();
  if (!stats.ok()) {
    err << "stats: " << stats.status().ToString() << "\n";
    return kExitFailure;
  }
  if (json) return PrintJson(*stats, out, err);
  const int64_t ok = stats->requests_ok();
  const pb::Timing& t = stats->cumulative();
  out << absl::StrFormat(
      "uptime %.1f s: %d ok, %d failed (%d queue full, %d deadline, %d cancelled), %d in flight "
      "(%d queued)\n"
      "bytes in %s, out %s\n"
      "average per ok request (ms): decode %.3f  queue %.3f  h2d %.3f  kernel %.3f  d2h %.3f  "
      "total %.3f\n",
      static_cast<double>(stats->uptime_ns()) / 1e9, ok, stats->requests_failed(),
      stats->rejected_queue_full(), stats->rejected_deadline(), stats->rejected_cancelled(),
      stats->in_flight(), stats->queued(), Mib(stats->bytes_in()), Mib(stats->bytes_out()),
      AverageMs(t.decode_ns(), ok), AverageMs(t.queue_ns(), ok), AverageMs(t.h2d_ns(), ok),
      AverageMs(t.kernel_ns(), ok), AverageMs(t.d2h_ns(), ok), AverageMs(t.total_ns(), ok));
  return kExitOk;
}

int RunHealth(AttentionClient& client, const std::string& service, std::ostream& out,
              std::ostream& err) {
  absl::StatusOr<HealthStatus> health = client.CheckHealth(service);
  if (!health.ok()) {
    err << "health: " << health.status().ToString() << "\n";
    return kExitFailure;
  }
  out << HealthStatusName(*health) << "\n";
  return *health == HealthStatus::kServing ? kExitOk : kExitFailure;
}

}  // namespace attn::cli
