// attn_loadgen's outputs: a text table (one row per level, printed as
// levels finish), a CSV with one row per level in the spirit of
// perf_analyzer's, and a JSON document with the configuration, the server's
// identity and every level's numbers (optionally every request's
// timestamps, like perf_analyzer's profile export).
#ifndef ATTN_CLIENT_LOADGEN_REPORT_WRITERS_H_
#define ATTN_CLIENT_LOADGEN_REPORT_WRITERS_H_

#include <optional>
#include <string>
#include <vector>

#include "attn/dtype.h"
#include "attn/problem.h"
#include "attn/tensor.h"
#include "attnserve/v1/attention.pb.h"
#include "level_runner.h"
#include "level_summary.h"

namespace attn::loadgen {

// What a sweep ran against and how; recorded in the JSON and the plot.
struct SweepContext {
  std::string tool_version;
  std::string command_line;
  std::string started_at;  // RFC 3339, UTC
  std::string address;
  std::string label;  // free text from --label
  Shape shape;  // Q's; varlen: [sequences, longest, H, D]
  DType dtype = DType::kBFloat16;
  // The call beyond self-attention (K/V shape, masks, LSE, varlen) and its
  // offsets; unset: non-causal self-attention over `shape`.
  std::optional<AttentionProblem> problem;
  std::vector<int32_t> cu_seqlens_q, cu_seqlens_k;
  // Per request; unset (0): self-attention over `shape`.
  RequestCost cost;
  int64_t request_bytes = 0;   // Q + K + V
  int64_t response_bytes = 0;  // O (+ LSE)
  std::string kernel;     // requested; empty = server default
  std::string transport;  // "auto", "unary" or "stream"
  int channels = 1;
  // Inline outputs went into buffers reused across requests
  // (--reuse_output_buffers), not a fresh string per response.
  bool reused_output_buffers = false;
  LevelSpec spec;  // the parts common to all levels (warm-up, duration, ...)
  std::optional<attnserve::v1::ServerInfo> server_info;
};

// "attn_loadgen: bf16 [1, 4096, 16, 128] on cuda (NVIDIA H200), closed loop"
// (with the problem's description when it is not plain self-attention).
std::string Headline(const SweepContext& context);

// The text table's header (two lines) and one row per level.
std::string TextHeader();
std::string TextRow(const LevelSummary& summary);

// One header line and one line per level; RFC 4180 quoting is never needed
// (no field contains a comma or quote).
std::string FormatCsv(const std::vector<LevelSummary>& levels);

// The whole sweep. With `runs` (parallel to `levels`), each level also lists
// its requests: due, sent and done times (ms since the level started) and
// status code.
std::string FormatJson(const SweepContext& context, const std::vector<LevelSummary>& levels,
                       const std::vector<LevelRun>* runs);

}  // namespace attn::loadgen

#endif  // ATTN_CLIENT_LOADGEN_REPORT_WRITERS_H_
