#include "report_writers.h"

#include <functional>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "attn/client/attend_types.h"
#include "json_writer.h"

namespace attn::loadgen {
namespace {

const char* ModeName(LoadMode mode) {
  return mode == LoadMode::kClosedLoop ? "closed_loop" : "open_loop";
}

std::string ErrorsField(const LevelSummary& s) {
  std::vector<std::string> parts;
  for (const auto& [code, count] : s.errors) parts.push_back(absl::StrCat(code, "=", count));
  return absl::StrJoin(parts, ";");
}

// CSV columns: name and value, in order.
struct Column {
  const char* name;
  std::function<std::string(const LevelSummary&)> value;
};

std::string F(double v) { return absl::StrFormat("%.6g", v); }

const std::vector<Column>& Columns() {
  static const auto* columns = new std::vector<Column>{
      {"mode", [](const LevelSummary& s) { return std::string(ModeName(s.mode)); }},
      {"concurrency", [](const LevelSummary& s) { return absl::StrCat(s.concurrency); }},
      {"target_rate_rps", [](const LevelSummary& s) { return F(s.target_rate); }},
      {"sent", [](const LevelSummary& s) { return absl::StrCat(s.sent); }},
      {"completed", [](const LevelSummary& s) { return absl::StrCat(s.completed); }},
      {"failed", [](const LevelSummary& s) { return absl::StrCat(s.failed); }},
      {"unsent", [](const LevelSummary& s) { return absl::StrCat(s.unsent); }},
      {"late_percent", [](const LevelSummary& s) { return F(s.late_percent); }},
      {"send_rate_rps", [](const LevelSummary& s) { return F(s.send_rate); }},
      {"throughput_rps", [](const LevelSummary& s) { return F(s.throughput_rps); }},
      {"tensor_gbps", [](const LevelSummary& s) { return F(s.tensor_gbps); }},
      {"tflops", [](const LevelSummary& s) { return F(s.tflops); }},
      {"latency_mean_ms", [](const LevelSummary& s) { return F(s.latency.mean_ms); }},
      {"latency_std_ms", [](const LevelSummary& s) { return F(s.latency.stddev_ms); }},
      {"latency_p50_ms", [](const LevelSummary& s) { return F(s.latency.p50_ms); }},
      {"latency_p90_ms", [](const LevelSummary& s) { return F(s.latency.p90_ms); }},
      {"latency_p95_ms", [](const LevelSummary& s) { return F(s.latency.p95_ms); }},
      {"latency_p99_ms", [](const LevelSummary& s) { return F(s.latency.p99_ms); }},
      {"latency_p999_ms", [](const LevelSummary& s) { return F(s.latency.p999_ms); }},
      {"latency_max_ms", [](const LevelSummary& s) { return F(s.latency.max_ms); }},
      {"client_marshal_ms", [](const LevelSummary& s) { return F(s.phases.client_marshal_ms); }},
      {"network_ms", [](const LevelSummary& s) { return F(s.phases.network_ms); }},
      {"server_receive_ms", [](const LevelSummary& s) { return F(s.phases.server_receive_ms); }},
      {"server_decode_ms", [](const LevelSummary& s) { return F(s.phases.server_decode_ms); }},
      {"server_queue_ms", [](const LevelSummary& s) { return F(s.phases.server_queue_ms); }},
      {"server_h2d_ms", [](const LevelSummary& s) { return F(s.phases.server_h2d_ms); }},
      {"server_kernel_ms", [](const LevelSummary& s) { return F(s.phases.server_kernel_ms); }},
      {"server_d2h_ms", [](const LevelSummary& s) { return F(s.phases.server_d2h_ms); }},
      {"server_other_ms", [](const LevelSummary& s) { return F(s.phases.server_other_ms); }},
      {"server_total_ms", [](const LevelSummary& s) { return F(s.phases.server_total_ms); }},
      {"client_unmarshal_ms",
       [](const LevelSummary& s) { return F(s.phases.client_unmarshal_ms); }},
      {"round_trip_ms", [](const LevelSummary& s) { return F(s.phases.round_trip_ms); }},
      {"streamed", [](const LevelSummary& s) { return absl::StrCat(s.streamed); }},
      {"errors", [](const LevelSummary& s) { return ErrorsField(s); }},
  };
  return *columns;
}

void WriteLatency(JsonWriter& json, const char* key, const LatencyStats& l) {
  json.Key(key).BeginObject();
  json.Field("count", l.count);
  json.Field("mean", l.mean_ms);
  json.Field("stddev", l.stddev_ms);
  json.Field("min", l.min_ms);
  json.Field("p50", l.p50_ms);
  json.Field("p90", l.p90_ms);
  json.Field("p95", l.p95_ms);
  json.Field("p99", l.p99_ms);
  json.Field("p99.9", l.p999_ms);
  json.Field("max", l.max_ms);
  json.EndObject();
}

void WriteLevel(JsonWriter& json, const LevelSummary& s, const LevelRun* run) {
  json.BeginObject();
  json.Field("label", LevelLabel(s));
  json.Field("mode", ModeName(s.mode));
  json.Field("concurrency", s.concurrency);
  json.Field("target_rate_rps", s.target_rate);
  json.Field("sent", s.sent);
  json.Field("completed", s.completed);
  json.Field("failed", s.failed);
  json.Field("unsent", s.unsent);
  json.Field("late", s.late);
  json.Field("late_percent", s.late_percent);
  json.Field("streamed", s.streamed);
  json.Key("errors").BeginObject();
  for (const auto& [code, count] : s.errors) json.Field(code, count);
  json.EndObject();
  json.Field("window_s", s.window_s);
  json.Field("send_rate_rps", s.send_rate);
  json.Field("throughput_rps", s.throughput_rps);
  json.Field("tensor_gbps", s.tensor_gbps);
  json.Field("tflops", s.tflops);
  WriteLatency(json, "latency_ms", s.latency);
  WriteLatency(json, "service_latency_ms", s.service_latency);
  const PhaseBreakdown& p = s.phases;
  json.Key("client_ms").BeginObject();
  json.Field("marshal", p.client_marshal_ms);
  json.Field("network", p.network_ms);
  json.Field("unmarshal", p.client_unmarshal_ms);
  json.Field("round_trip", p.round_trip_ms);
  json.EndObject();
  json.Key("server_ms").BeginObject();
  json.Field("receive", p.server_receive_ms);
  json.Field("decode", p.server_decode_ms);
  json.Field("queue", p.server_queue_ms);
  json.Field("h2d", p.server_h2d_ms);
  json.Field("kernel", p.server_kernel_ms);
  json.Field("d2h", p.server_d2h_ms);
  json.Field("other", p.server_other_ms);
  json.Field("total", p.server_total_ms);
  json.EndObject();
  if (s.server_stats.available) {
    const ServerStatsDelta& d = s.server_stats;
    json.Key("server_stats_delta").BeginObject();
    json.Field("requests_ok", d.requests_ok);
    json.Field("requests_failed", d.requests_failed);
    json.Field("rejected_queue_full", d.rejected_queue_full);
    json.Field("rejected_deadline", d.rejected_deadline);
    json.Field("avg_queue_ms", d.avg_queue_ms);
    json.Field("avg_kernel_ms", d.avg_kernel_ms);
    json.Field("avg_total_ms", d.avg_total_ms);
    json.Field("mean_batch_size", d.mean_batch_size);
    json.EndObject();
  }
  if (run != nullptr) {
    json.Key("requests").BeginArray();
    for (const RequestRecord& r : run->records) {
      json.BeginObject();
      json.Field("due_ms", static_cast<double>(r.due_ns) / 1e6);
      json.Field("sent_ms", static_cast<double>(r.sent_ns) / 1e6);
      json.Field("done_ms", static_cast<double>(r.done_ns) / 1e6);
      json.Field("code", absl::StatusCodeToString(r.code));
      json.EndObject();
    }
    json.EndArray();
  }
  json.EndObject();
}

}  // namespace

std::string Headline(const SweepContext& c) {
  std::string where = "server";
  if (c.server_info.has_value()) {
    where = c.server_info->backend();
    if (!c.server_info->devices().empty()) {
      absl::StrAppend(&where, " (", c.server_info->devices(0).name(), ")");
    }
  }
  const bool plain = !c.problem.has_value() || (c.problem->IsSelfAttentionShape() &&
                                                !c.problem->HasMask() && !c.problem->return_lse);
  return absl::StrCat("attn_loadgen: ", DTypeName(c.dtype), " ",
                      plain ? c.shape.ToString() : c.problem->ToString(), " on ", where, ", ",
                      c.spec.mode == LoadMode::kClosedLoop ? "closed" : "open", " loop",
                      c.label.empty() ? "" : absl::StrCat(", ", c.label));
}

std::string TextHeader() {
  return absl::StrFormat(
      "%-10s %7s %7s %6s %6s %9s %8s %8s | %8s %8s %8s %8s %8s | %8s %9s | %10s\n", "level",
      "sent", "ok", "failed", "late%", "req/s", "GB/s", "TFLOP/s", "p50 ms", "p90 ms", "p99 ms",
      "p99.9 ms", "max ms", "queue ms", "kernel ms", "network ms");
}

std::string TextRow(const LevelSummary& s) {
  const std::string late =
      s.mode == LoadMode::kOpenLoop ? absl::StrFormat("%.1f", s.late_percent) : "-";
  std::string row = absl::StrFormat(
      "%-10s %7d %7d %6d %6s %9.2f %8.3f %8.3f | %8.2f %8.2f %8.2f %8.2f %8.2f | %8.3f %9.3f | "
      "%10.3f",
      LevelLabel(s), s.sent, s.completed, s.failed, late, s.throughput_rps, s.tensor_gbps, s.tflops,
      s.latency.p50_ms, s.latency.p90_ms, s.latency.p99_ms, s.latency.p999_ms, s.latency.max_ms,
      s.phases.server_queue_ms, s.phases.server_kernel_ms, s.phases.network_ms);
  if (!s.errors.empty()) absl::StrAppend(&row, "  errors: ", ErrorsField(s));
  if (s.unsent > 0) absl::StrAppend(&row, "  unsent: ", s.unsent);
  if (s.server_stats.mean_batch_size > 0) {
    absl::StrAppendFormat(&row, "  mean batch: %.2f", s.server_stats.mean_batch_size);
  }
  return row + "\n";
}

std::string FormatCsv(const std::vector<LevelSummary>& levels) {
  std::vector<std::string> names;
  for (const Column& c : Columns()) names.push_back(c.name);
  std::string out = absl::StrJoin(names, ",") + "\n";
  for (const LevelSummary& s : levels) {
    std::vector<std::string> values;
    for (const Column& c : Columns()) values.push_back(c.value(s));
    out += absl::StrJoin(values, ",") + "\n";
  }
  return out;
}

std::string FormatJson(const SweepContext& c, const std::vector<LevelSummary>& levels,
                       const std::vector<LevelRun>* runs) {
  JsonWriter json;
  json.BeginObject();
  json.Field("tool", "attn_loadgen");
  json.Field("version", c.tool_version);
  json.Field("command_line", c.command_line);
  json.Field("started_at", c.started_at);
  json.Field("headline", Headline(c));
  json.Key("config").BeginObject();
  json.Field("address", c.address);
  json.Field("label", c.label);
  json.Key("shape").BeginObject();
  json.Field("batch", c.shape.batch);
  json.Field("seq_len", c.shape.seq_len);
  json.Field("num_heads", c.shape.num_heads);
  json.Field("head_dim", c.shape.head_dim);
  json.EndObject();
  json.Field("dtype", DTypeName(c.dtype));
  json.Field("kernel", c.kernel);
  json.Field("transport", c.transport);
  json.Field("channels", c.channels);
  json.Field("reused_output_buffers", c.reused_output_buffers);
  json.Field("mode", ModeName(c.spec.mode));
  json.Field("arrivals", c.spec.arrivals == Arrivals::kPoisson ? "poisson" : "constant");
  json.Field("warmup_s", absl::ToDoubleSeconds(c.spec.warmup));
  json.Field("duration_s", absl::ToDoubleSeconds(c.spec.duration));
  json.Field("max_requests", c.spec.max_requests);
  json.Field("max_in_flight", c.spec.max_in_flight);
  json.Field("late_tolerance_ms", absl::ToDoubleMilliseconds(c.spec.late_tolerance));
  const AttentionProblem problem = c.problem.value_or(AttentionProblem::SelfAttention(
      c.shape.batch, c.shape.seq_len, c.shape.num_heads, c.shape.head_dim));
  json.Key("problem").BeginObject();
  json.Field("description", problem.ToString());
  json.Field("seq_len_q", problem.seqlen_q);
  json.Field("kv_seq_len", problem.seqlen_k);
  json.Field("num_heads", problem.heads_q);
  json.Field("kv_num_heads", problem.heads_kv);
  json.Field("causal", problem.causal);
  json.Field("window_left", problem.window_left);
  json.Field("window_right", problem.window_right);
  json.Field("return_lse", problem.return_lse);
  json.Field("varlen", problem.varlen);
  for (const auto& [key, offsets] :
       {std::pair{"cu_seqlens_q", &c.cu_seqlens_q}, std::pair{"cu_seqlens_k", &c.cu_seqlens_k}}) {
    json.Key(key).BeginArray();
    for (int32_t offset : *offsets) json.Int(offset);
    json.EndArray();
  }
  json.EndObject();
  const bool have_cost = c.cost.flops > 0;
  const RequestCost cost = have_cost ? c.cost : RequestCost::SelfAttention(c.shape);
  json.Field("request_bytes", have_cost ? c.request_bytes : 3 * c.shape.NumElements() * 2);
  json.Field("response_bytes", have_cost ? c.response_bytes : c.shape.NumElements() * 2);
  json.Field("flops_per_request", cost.flops);
  json.EndObject();
  if (c.server_info.has_value()) {
    const attnserve::v1::ServerInfo& info = *c.server_info;
    json.Key("server").BeginObject();
    json.Field("version", info.version());
    json.Field("backend", info.backend());
    json.Field("default_kernel", info.default_kernel());
    json.Field("build", info.build());
    json.Key("devices").BeginArray();
    for (const auto& d : info.devices()) json.String(d.name());
    json.EndArray();
    json.EndObject();
  }
  json.Key("levels").BeginArray();
  for (size_t i = 0; i < levels.size(); ++i) {
    WriteLevel(json, levels[i], runs != nullptr ? &(*runs)[i] : nullptr);
  }
  json.EndArray();
  json.EndObject();
  return json.str();
}

}  // namespace attn::loadgen
