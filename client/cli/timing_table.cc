#include "timing_table.h"

#include <algorithm>
#include <cstdint>
#include <functional>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"

namespace attn::cli {
namespace {

struct Row {
  const char* label;
  std::function<int64_t(const AttendResult&)> ns;
};

const std::vector<Row>& Rows() {
  static const auto* rows = new std::vector<Row>{
      {"client marshal", [](const AttendResult& r) { return r.client.marshal_ns; }},
      {"network + gRPC",
       [](const AttendResult& r) { return r.client.NetworkNs(r.server); }},
      {"server receive", [](const AttendResult& r) { return r.server.receive_ns; }},
      {"server decode", [](const AttendResult& r) { return r.server.decode_ns; }},
      {"server queue", [](const AttendResult& r) { return r.server.queue_ns; }},
      {"server H2D", [](const AttendResult& r) { return r.server.h2d_ns; }},
      {"server kernel", [](const AttendResult& r) { return r.server.kernel_ns; }},
      {"server D2H", [](const AttendResult& r) { return r.server.d2h_ns; }},
      {"server other", [](const AttendResult& r) { return r.server.OtherNs(); }},
      {"client unmarshal", [](const AttendResult& r) { return r.client.unmarshal_ns; }},
      {"round trip", [](const AttendResult& r) { return r.client.round_trip_ns; }},
  };
  return *rows;
}

std::vector<int64_t> Sorted(const std::vector<AttendResult>& results,
                            const std::function<int64_t(const AttendResult&)>& ns) {
  std::vector<int64_t> values;
  for (const AttendResult& r : results) values.push_back(ns(r));
  std::sort(values.begin(), values.end());
  return values;
}

int64_t Median(const std::vector<int64_t>& sorted) { return sorted[sorted.size() / 2]; }

double Ms(int64_t ns) { return static_cast<double>(ns) / 1e6; }

}  // namespace

std::string FormatTimingTable(const std::vector<AttendResult>& results) {
  std::string out;
  const bool single = results.size() == 1;
  if (single) {
    absl::StrAppendFormat(&out, "  %-18s %10s %7s\n", "phase", "ms", "share");
  } else {
    absl::StrAppendFormat(&out, "  %-18s %10s %10s %10s   (%d calls)\n", "phase", "median ms",
                          "min ms", "max ms", results.size());
  }
  const int64_t round_trip = Median(Sorted(results, Rows().back().ns));
  for (size_t i = 0; i < Rows().size(); ++i) {
    const Row& row = Rows()[i];
    const std::vector<int64_t> values = Sorted(results, row.ns);
    if (i + 1 == Rows().size()) out += "  " + std::string(40, '-') + "\n";  // the total
    if (single) {
      const double share =
          round_trip > 0 ? 100.0 * static_cast<double>(values[0]) / static_cast<double>(round_trip)
                         : 0.0;
      absl::StrAppendFormat(&out, "  %-18s %10.3f %6.1f%%\n", row.label, Ms(values[0]), share);
    } else {
      absl::StrAppendFormat(&out, "  %-18s %10.3f %10.3f %10.3f\n", row.label,
                            Ms(Median(values)), Ms(values.front()), Ms(values.back()));
    }
  }
  if (results.front().client.streamed) {
    const int64_t upload =
        Median(Sorted(results, [](const AttendResult& r) { return r.client.upload_ns; }));
    absl::StrAppendFormat(&out, "  (streamed: request upload took %.3f ms of the round trip)\n",
                          Ms(upload));
  }
  const AttendResult& last = results.back();
  if (!last.shard_server.empty()) out += FormatShards(last);
  return out;
}

std::string FormatShards(const AttendResult& result) {
  const std::vector<ServerTiming>& shards = result.shard_server;
  std::string out = absl::StrFormat(
      "  split into %d shards, sent side by side: the rows above are shard %d's, the last to "
      "answer (client marshal: until it was sent)\n",
      shards.size(), result.last_shard + 1);
  absl::StrAppendFormat(&out, "  %-18s %10s %10s %10s\n", "per shard", "min ms", "max ms",
                        "sum ms");
  const std::pair<const char*, int64_t ServerTiming::*> rows[] = {
      {"server queue", &ServerTiming::queue_ns},
      {"server kernel", &ServerTiming::kernel_ns},
      {"server total", &ServerTiming::total_ns}};
  for (const auto& [label, field] : rows) {
    int64_t lo = shards.front().*field, hi = lo, sum = 0;
    for (const ServerTiming& shard : shards) {
      lo = std::min(lo, shard.*field);
      hi = std::max(hi, shard.*field);
      sum += shard.*field;
    }
    absl::StrAppendFormat(&out, "  %-18s %10.3f %10.3f %10.3f\n", label, Ms(lo), Ms(hi), Ms(sum));
  }
  return out;
}

std::string FormatTensorPaths(const ServerTiming& server) {
  const std::pair<const char*, TensorPath> paths[] = {{"q", server.q_path},
                                                      {"k", server.k_path},
                                                      {"v", server.v_path},
                                                      {"out", server.out_path},
                                                      {"lse", server.lse_path}};
  std::vector<std::string> known;
  for (const auto& [name, path] : paths) {
    if (path != TensorPath::kUnspecified) {
      known.push_back(absl::StrCat(name, " ", TensorPathName(path)));
    }
  }
  if (known.empty()) return "";
  return absl::StrCat("  tensors: ", absl::StrJoin(known, ", "), "\n");
}

std::string FormatThroughput(const std::vector<AttendResult>& results, double flops,
                             double bytes) {
  // The whole problem's kernel time: a split call's shards summed.
  const int64_t kernel =
      Median(Sorted(results, [](const AttendResult& r) { return r.SummedKernelNs(); }));
  const int64_t round_trip =
      Median(Sorted(results, [](const AttendResult& r) { return r.client.round_trip_ns; }));
  const size_t shards = results.back().shard_server.size();
  const std::string summed =
      shards > 0 ? absl::StrFormat(", the %d shards' kernel time summed", shards) : "";
  std::string out;
  if (kernel > 0) {
    absl::StrAppendFormat(&out, "  kernel:     %.3f TFLOP/s (%.3g GFLOP in %.3f ms%s)\n",
                          flops / static_cast<double>(kernel) / 1e3, flops / 1e9, Ms(kernel),
                          summed);
  }
  if (round_trip > 0) {
    absl::StrAppendFormat(&out, "  end to end: %.3f TFLOP/s, %.3f GB/s of tensors (%.1f MiB)\n",
                          flops / static_cast<double>(round_trip) / 1e3,
                          bytes / static_cast<double>(round_trip), bytes / (1 << 20));
  }
  return out;
}

}  // namespace attn::cli
