// attn_loadgen: load tests an attnserve server and reports throughput and
// latency per load level, in the manner of Triton's perf_analyzer.
//
// Closed loop, a concurrency sweep (requests kept in flight):
//   attn_loadgen --address=gpu:50051 --shape=1,4096,16,128 --dtype=bf16
//       --concurrency=1:64:x2 --duration=10s --out_dir=results/
// Open loop at fixed rates (latency from each request's scheduled time):
//   attn_loadgen --rate=50:400:x2 --arrivals=poisson ...
// The request may use every feature of the service (problem_flags.h):
//   attn_loadgen --shape=1,4096,32,128 --kv_shape=1,4096,8,128 --causal --lse ...
//   attn_loadgen --shape=1,1,16,128 --seqlens_q=512,3000,77 --window=256,0 ...
//
// Writes a text table to stdout and, with --out_dir (or --csv/--json/--svg),
// loadgen.csv, loadgen.json and loadgen_latency.svg. Exit status: 0 when
// the sweep ran and some request succeeded, 1 when the server was
// unreachable, a preflight request failed or nothing succeeded, 2 for bad
// flags.
#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/status/status.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "attn/client/attention_client.h"
#include "attn/command_line.h"
#include "connection_flags.h"
#include "large_allocations.h"
#include "latency_plot.h"
#include "level_runner.h"
#include "level_summary.h"
#include "output_buffer_pool.h"
#include "problem_flags.h"
#include "progress_line.h"
#include "report_writers.h"
#include "shared_memory_tensors.h"
#include "sweep_spec.h"

ABSL_FLAG(absl::Duration, timeout, absl::Seconds(30),
          "Deadline of each request (bounds how long a level can drain).");
ABSL_FLAG(int, channels, 1,
          "Clients to spread requests over (round robin), each with its own --connections TCP "
          "connections.");

ABSL_FLAG(std::string, shape, "1,4096,16,128",
          "B,S,H,D of every request's Q (random N(0,1) data); K/V, masks, LSE and varlen: "
          "--kv_shape, --causal, --window, --lse, --seqlens_q/--cu_seqlens_q.");
ABSL_FLAG(std::string, dtype, "bf16", "bf16 or fp16.");
ABSL_FLAG(std::string, kernel, "", "Kernel to request; empty = the server's default.");
ABSL_FLAG(std::string, transport, "auto", "auto, unary or stream.");
ABSL_FLAG(uint64_t, seed, 1, "Seed of the input data and of Poisson arrivals.");

ABSL_FLAG(std::string, concurrency, "1",
          "Closed loop: requests in flight per level: N, a list (1,2,4), start:end:step or "
          "start:end:xFACTOR (1:64:x2).");
ABSL_FLAG(std::string, rate, "",
          "Open loop instead: requests/s per level, same syntax as --concurrency.");
ABSL_FLAG(std::string, arrivals, "poisson", "Open loop: poisson or constant inter-arrival gaps.");
ABSL_FLAG(int, max_in_flight, 256,
          "Open loop: most requests outstanding; further sends wait (and count as late).");
ABSL_FLAG(absl::Duration, late_tolerance, absl::Milliseconds(1),
          "Open loop: a send this much after its scheduled time counts as late.");
ABSL_FLAG(absl::Duration, warmup, absl::Seconds(2), "Per level: excluded from the results.");
ABSL_FLAG(absl::Duration, duration, absl::Seconds(10), "Per level: the measurement window.");
ABSL_FLAG(int64_t, requests, 0,
          "Per level: stop after this many measured requests (0 = only --duration).");
ABSL_FLAG(double, latency_limit_ms, 0,
          "Stop the sweep after a level whose p99 latency exceeds this (0 = never).");

ABSL_FLAG(std::string, out_dir, "",
          "Write loadgen.csv, loadgen.json and loadgen_latency.svg into this directory.");
ABSL_FLAG(std::string, csv, "", "CSV path (overrides --out_dir's).");
ABSL_FLAG(std::string, json, "", "JSON path (overrides --out_dir's).");
ABSL_FLAG(std::string, svg, "", "SVG plot path (overrides --out_dir's).");
ABSL_FLAG(bool, json_requests, false, "Also list every request's timestamps in the JSON.");
ABSL_FLAG(std::string, progress, "auto", "Live progress on stderr: auto (if a terminal), "
          "always or never.");
ABSL_FLAG(std::string, label, "", "Free text recorded in the reports and the plot title.");
ABSL_FLAG(std::string, shared_memory, "none",
          "none, system or cuda (perf_analyzer's --shared-memory): Q, K, V and the outputs stay "
          "in shared-memory regions registered with a same-host server (--allow_shared_memory): "
          "POSIX shared memory, or GPU memory of --shared_memory_device passed by CUDA IPC. The "
          "first request's output is checked bit for bit against the inline path's.");
ABSL_FLAG(int, shared_memory_device, 0, "--shared_memory=cuda: the CUDA device of the tensors.");
ABSL_FLAG(bool, reuse_output_buffers, false,
          "Write each response's O into a buffer reused across requests (AttendOptions::"
          "out_destination), as the Python client and a client reusing its output tensors do; "
          "false: into a fresh string per response (AttendResult::out).");
ABSL_FLAG(int, shared_memory_slots, 0,
          "--shared_memory: output slots used round robin; 0 = the largest concurrency (open "
          "loop: --max_in_flight, at most 64).");

namespace {

namespace lg = ::attn::loadgen;

constexpr int kExitFailure = 1;
using attn::kExitUsage;

constexpr char kUsage[] =
    "Load tests an attnserve server: closed-loop concurrency sweeps or open-loop rates, with\n"
    "latency percentiles, throughput and the client/server time breakdown per level; a text\n"
    "table, and CSV, JSON and an SVG latency-throughput plot.\n\n"
    "usage: attn_loadgen [--address=HOST:PORT] [--shape=B,S,H,D] [--dtype=bf16|fp16]\n"
    "                    [--concurrency=LEVELS | --rate=LEVELS] [--warmup=2s] [--duration=10s]\n"
    "                    [--out_dir=DIR] [problem flags: --kv_shape --causal --window --lse ...]\n\n"
    "LEVELS: N, a list (1,2,4), start:end:step or start:end:xFACTOR.\n"
    "exit status: 0 some request succeeded, 1 unreachable server, failed preflight request or\n"
    "nothing succeeded, 2 usage.\n\n"
    "examples:\n"
    "  attn_loadgen --address=gpu-node:50051 --shape=1,4096,16,128 --concurrency=1:64:x2 \\\n"
    "      --duration=15s --out_dir=results/\n"
    "  attn_loadgen --rate=20:160:x2 --arrivals=poisson --duration=20s --out_dir=results/\n"
    "  attn_loadgen --shape=1,4096,32,128 --kv_shape=1,4096,8,128 --causal --lse "
    "--concurrency=1:16:x2\n"
    "  # the CPU backend (a fraction of a GPU's speed): small problems, long deadlines\n"
    "  attn_loadgen --shape=1,512,8,64 --concurrency=1,2 --warmup=1s --duration=5s";

int Usage(const std::string& message) {
  std::cerr << "attn_loadgen: " << message << "\n";
  return kExitUsage;
}

bool WriteFile(const std::string& path, const std::string& contents) {
  std::ofstream file(path, std::ios::binary | std::ios::trunc);
  file << contents;
  file.close();
  if (!file) {
    std::cerr << "attn_loadgen: cannot write " << path << "\n";
    return false;
  }
  std::cout << "wrote " << path << "\n";
  return true;
}

// The path for one output: its own flag, else `name` in --out_dir, else "".
std::string OutputPath(const std::string& explicit_path, const char* name) {
  if (!explicit_path.empty()) return explicit_path;
  const std::string dir = absl::GetFlag(FLAGS_out_dir);
  return dir.empty() ? "" : (std::filesystem::path(dir) / name).string();
}

}  // namespace

int main(int argc, char** argv) {
  attn::tools::KeepLargeAllocationsInTheHeap();
  const std::vector<char*> positional =
      attn::ParseCommandLine(argc, argv, attn::tools::ToolCommandLine("attn_loadgen", kUsage));
  if (positional.size() > 1) return Usage(absl::StrCat("unexpected argument '", positional[1], "'"));

  // Levels and per-level bounds.
  lg::LevelSpec base;
  std::vector<lg::LevelSpec> levels;
  const std::string rate_flag = absl::GetFlag(FLAGS_rate);
  base.mode = rate_flag.empty() ? lg::LoadMode::kClosedLoop : lg::LoadMode::kOpenLoop;
  const std::string arrivals = absl::GetFlag(FLAGS_arrivals);
  if (arrivals != "poisson" && arrivals != "constant") {
    return Usage("--arrivals must be poisson or constant");
  }
  base.arrivals = arrivals == "poisson" ? lg::Arrivals::kPoisson : lg::Arrivals::kConstant;
  base.warmup = absl::GetFlag(FLAGS_warmup);
  base.duration = absl::GetFlag(FLAGS_duration);
  base.max_requests = absl::GetFlag(FLAGS_requests);
  base.max_in_flight = absl::GetFlag(FLAGS_max_in_flight);
  base.late_tolerance = absl::GetFlag(FLAGS_late_tolerance);
  base.seed = absl::GetFlag(FLAGS_seed);
  if (base.warmup < absl::ZeroDuration() || base.duration <= absl::ZeroDuration()) {
    return Usage("--warmup must be >= 0 and --duration > 0");
  }
  if (base.max_requests < 0 || base.max_in_flight < 1) {
    return Usage("--requests must be >= 0 and --max_in_flight >= 1");
  }
  if (base.mode == lg::LoadMode::kClosedLoop) {
    absl::StatusOr<std::vector<int>> sweep = lg::ParseIntegerSweep(absl::GetFlag(FLAGS_concurrency));
    if (!sweep.ok()) return Usage(absl::StrCat("--concurrency: ", sweep.status().message()));
    for (int c : *sweep) {
      lg::LevelSpec spec = base;
      spec.concurrency = c;
      levels.push_back(spec);
    }
  } else {
    absl::StatusOr<std::vector<double>> sweep = lg::ParseSweep(rate_flag);
    if (!sweep.ok()) return Usage(absl::StrCat("--rate: ", sweep.status().message()));
    for (double r : *sweep) {
      lg::LevelSpec spec = base;
      spec.rate = r;
      levels.push_back(spec);
    }
  }

  // Request.
  attn::Shape shape;
  if (!attn::tools::ParseShapeFlag(absl::GetFlag(FLAGS_shape), &shape)) {
    return Usage("--shape must be B,S,H,D (four integers >= 1)");
  }
  attn::DType dtype;
  if (!attn::ParseDType(absl::GetFlag(FLAGS_dtype), &dtype)) {
    return Usage("--dtype must be bf16 or fp16");
  }
  absl::StatusOr<attn::tools::ProblemFlagValues> problem = attn::tools::ProblemFlagsFromFlags();
  if (!problem.ok()) return Usage(std::string(problem.status().message()));
  absl::StatusOr<attn::AttentionInputs> geometry = attn::MakeGeometry(
      shape, dtype, problem->kv_shape, problem->cu_seqlens_q, problem->cu_seqlens_k);
  if (!geometry.ok()) return Usage(std::string(geometry.status().message()));
  shape = geometry->shape;
  attn::AttendOptions call;
  problem->ApplyTo(&call);
  call.kernel = absl::GetFlag(FLAGS_kernel);
  call.timeout = absl::GetFlag(FLAGS_timeout);
  const std::string transport = absl::GetFlag(FLAGS_transport);
  if (transport == "unary") {
    call.transport = attn::Transport::kUnary;
  } else if (transport == "stream") {
    call.transport = attn::Transport::kStream;
  } else if (transport != "auto") {
    return Usage("--transport must be auto, unary or stream");
  }
  const int channels = absl::GetFlag(FLAGS_channels);
  if (channels < 1) return Usage("--channels must be >= 1");
  const std::string progress_flag = absl::GetFlag(FLAGS_progress);
  if (progress_flag != "auto" && progress_flag != "always" && progress_flag != "never") {
    return Usage("--progress must be auto, always or never");
  }
  const bool show_progress =
      progress_flag == "always" || (progress_flag == "auto" && lg::StderrIsTerminal());

  // Connections: the first fetches the server's info; all use its stream
  // threshold so every request takes the same path.
  absl::StatusOr<attn::ClientOptions> flag_options = attn::tools::ClientOptionsFromFlags();
  if (!flag_options.ok()) {
    std::cerr << "attn_loadgen: " << flag_options.status().message() << "\n";
    return kExitFailure;
  }
  attn::ClientOptions options = *std::move(flag_options);
  options.rpc_timeout = absl::GetFlag(FLAGS_timeout);
  options.dedicated_connection = channels > 1;
  std::vector<std::unique_ptr<attn::AttentionClient>> clients;
  std::vector<attn::AttentionClient*> client_ptrs;
  for (int i = 0; i < channels; ++i) {
    absl::StatusOr<std::unique_ptr<attn::AttentionClient>> client =
        attn::AttentionClient::Connect(options);
    if (!client.ok()) {
      std::cerr << "attn_loadgen: " << client.status().ToString() << "\n";
      return kExitFailure;
    }
    if (i == 0) {
      options.fetch_server_info = false;
      options.stream_threshold_bytes = (*client)->stream_threshold_bytes();
    }
    client_ptrs.push_back(client->get());
    clients.push_back(*std::move(client));
  }

  auto inputs = std::make_shared<const attn::AttentionInputs>(
      attn::MakeRandomInputs(*geometry, absl::GetFlag(FLAGS_seed)));
  if (absl::Status valid = inputs->Validate(); !valid.ok()) {
    return Usage(std::string(valid.message()));
  }
  const lg::RequestCost cost = lg::RequestCost::Of(*inputs, call);
  // One request first: a shape the server refuses fails here, once, with
  // its message, instead of as thousands of errors.
  {
    absl::StatusOr<attn::AttendResult> preflight = clients.front()->Attend(*inputs, call);
    if (!preflight.ok()) {
      std::cerr << "attn_loadgen: preflight request failed: " << preflight.status().ToString()
                << "\n";
      // The usual cause on a CPU server: a GPU-sized --shape (the README's
      // loadgen example takes minutes per request on the CPU backend).
      if (preflight.status().code() == absl::StatusCode::kDeadlineExceeded) {
        const auto& info = clients.front()->server_info();
        std::cerr << absl::StrFormat(
            "attn_loadgen: one request (%.1f GFLOP) did not finish within --timeout=%s on the "
            "server's %s backend; use a smaller --shape (e.g. --shape=1,512,8,64 on the CPU "
            "backend) or a longer --timeout\n",
            cost.flops / 1e9, absl::FormatDuration(absl::GetFlag(FLAGS_timeout)),
            info.has_value() ? info->backend() : "unknown");
      }
      return kExitFailure;
    }
  }

  // Shared memory: the same inputs in regions, outputs into slots; the
  // first request by reference must give the inline preflight's output.
  std::vector<attn::AttendOptions> calls = {call};
  absl::StatusOr<lg::SharedMemoryKind> shm_kind =
      lg::ParseSharedMemoryKind(absl::GetFlag(FLAGS_shared_memory));
  if (!shm_kind.ok()) return Usage(std::string(shm_kind.status().message()));
  std::unique_ptr<lg::SharedMemoryTensors> shm;
  if (*shm_kind != lg::SharedMemoryKind::kNone) {
    int slots = absl::GetFlag(FLAGS_shared_memory_slots);
    if (slots <= 0) {
      for (const lg::LevelSpec& spec : levels) {
        slots = std::max(slots, spec.mode == lg::LoadMode::kClosedLoop
                                    ? spec.concurrency
                                    : std::min(spec.max_in_flight, 64));
      }
    }
    absl::StatusOr<attn::AttendResult> inline_result = clients.front()->Attend(*inputs, call);
    if (!inline_result.ok()) {
      std::cerr << "attn_loadgen: " << inline_result.status().ToString() << "\n";
      return kExitFailure;
    }
    attn::AttentionInputs by_reference = *inputs;
    absl::StatusOr<std::unique_ptr<lg::SharedMemoryTensors>> made =
        lg::SharedMemoryTensors::Create(*shm_kind, absl::GetFlag(FLAGS_shared_memory_device),
                                        std::max(slots, 1), *clients.front(), &by_reference, call);
    if (!made.ok()) {
      std::cerr << "attn_loadgen: --shared_memory: " << made.status().ToString() << "\n";
      return kExitFailure;
    }
    shm = *std::move(made);
    // Every client uses the first one's regions: region ids are not tied
    // to a connection, and its lease lasts as long as it does.
    inputs = std::make_shared<const attn::AttentionInputs>(std::move(by_reference));
    calls = shm->SlotCalls(call);
    absl::StatusOr<attn::AttendResult> checked = clients.front()->Attend(*inputs, calls.front());
    absl::StatusOr<std::string> out = checked.ok() ? shm->ReadOut(0) : checked.status();
    if (!out.ok()) {
      std::cerr << "attn_loadgen: --shared_memory: first request: " << out.status().ToString()
                << "\n";
      return kExitFailure;
    }
    if (*out != inline_result->out) {
      std::cerr << "attn_loadgen: --shared_memory: the output written to the region differs "
                   "from the inline path's for the same inputs\n";
      return kExitFailure;
    }
    std::cout << shm->Describe() << "; paths q=" << attn::TensorPathName(checked->server.q_path)
              << " out=" << attn::TensorPathName(checked->server.out_path)
              << "; first output identical to the inline path's (" << out->size()
              << " bytes)\n";
  }

  lg::SweepContext context;
  context.tool_version = attn::Version();
  std::vector<std::string> args(argv, argv + argc);
  context.command_line = absl::StrJoin(args, " ");
  context.started_at = absl::FormatTime(absl::RFC3339_sec, absl::Now(), absl::UTCTimeZone());
  context.address = options.address;
  context.label = absl::GetFlag(FLAGS_label);
  context.shape = shape;
  context.dtype = dtype;
  context.problem = inputs->Problem(call);
  context.cu_seqlens_q = inputs->cu_seqlens_q;
  context.cu_seqlens_k = inputs->cu_seqlens_k;
  context.cost = cost;
  context.request_bytes = inputs->InputBytes();
  context.response_bytes = inputs->QBytes() + (call.return_lse ? inputs->LseElements() * 4 : 0);
  context.kernel = call.kernel;
  context.transport = shm != nullptr ? absl::StrCat(transport, " + shared_memory=",
                                                     absl::GetFlag(FLAGS_shared_memory))
                                      : transport;
  context.channels = channels;
  context.reused_output_buffers = absl::GetFlag(FLAGS_reuse_output_buffers) && shm == nullptr;
  // TCP connections in all: each client spreads its calls over its own.
  const int connections = channels * clients.front()->connection_count();
  context.spec = base;
  context.server_info = clients.front()->server_info();

  std::cout << lg::Headline(context) << "\n"
            << absl::StrFormat("%.2f MiB per request (Q, K, V) + %.2f MiB response, %.3g GFLOP; "
                               "warm-up %s, window %s per level, %d connection(s), "
                               "O into %s\n",
                               static_cast<double>(context.request_bytes) / (1 << 20),
                               static_cast<double>(context.response_bytes) / (1 << 20),
                               cost.flops / 1e9,
                               absl::FormatDuration(base.warmup),
                               absl::FormatDuration(base.duration), connections,
                               context.reused_output_buffers ? "reused buffers"
                                                             : "a fresh string each")
            << lg::TextHeader() << std::flush;

  lg::LevelRunner runner(client_ptrs, inputs, calls);
  lg::OutputBufferPool outputs(static_cast<size_t>(inputs->QBytes()));
  if (context.reused_output_buffers) runner.WriteOutputsInto(&outputs);
  std::vector<lg::LevelSummary> summaries;
  std::vector<lg::LevelRun> runs;
  const double latency_limit = absl::GetFlag(FLAGS_latency_limit_ms);
  for (const lg::LevelSpec& spec : levels) {
    lg::LevelRun run;
    {
      lg::LevelSummary label_only;
      label_only.mode = spec.mode;
      label_only.concurrency = spec.concurrency;
      label_only.target_rate = spec.rate;
      lg::ProgressLine progress(runner, lg::LevelLabel(label_only), show_progress);
      run = runner.Run(spec);
    }
    lg::LevelSummary summary = lg::Summarize(run, cost);
    std::cout << lg::TextRow(summary) << std::flush;
    summaries.push_back(summary);
    if (absl::GetFlag(FLAGS_json_requests)) {
      runs.push_back(std::move(run));
    }
    if (summary.completed == 0) {
      std::cout << "stopping the sweep: no request of this level succeeded\n";
      break;
    }
    if (latency_limit > 0 && summary.latency.p99_ms > latency_limit) {
      std::cout << absl::StrFormat("stopping the sweep: p99 %.2f ms exceeds --latency_limit_ms=%g\n",
                                   summary.latency.p99_ms, latency_limit);
      break;
    }
  }

  bool ok = true;
  const std::string out_dir = absl::GetFlag(FLAGS_out_dir);
  if (!out_dir.empty()) {
    std::error_code error;
    std::filesystem::create_directories(out_dir, error);
    if (error) {
      std::cerr << "attn_loadgen: cannot create " << out_dir << ": " << error.message() << "\n";
      return kExitFailure;
    }
  }
  if (const std::string path = OutputPath(absl::GetFlag(FLAGS_csv), "loadgen.csv"); !path.empty()) {
    ok &= WriteFile(path, lg::FormatCsv(summaries));
  }
  if (const std::string path = OutputPath(absl::GetFlag(FLAGS_json), "loadgen.json");
      !path.empty()) {
    ok &= WriteFile(path, lg::FormatJson(context, summaries,
                                         absl::GetFlag(FLAGS_json_requests) ? &runs : nullptr));
  }
  if (const std::string path = OutputPath(absl::GetFlag(FLAGS_svg), "loadgen_latency.svg");
      !path.empty()) {
    const std::string subtitle = absl::StrFormat(
        "%s, %s, %s per level after %s warm-up, %d connection(s); %s", context.address,
        base.mode == lg::LoadMode::kClosedLoop ? "closed loop" : "open loop",
        absl::FormatDuration(base.duration), absl::FormatDuration(base.warmup), connections,
        context.started_at);
    ok &= WriteFile(path, lg::RenderLatencyPlot(lg::Headline(context), subtitle, summaries,
                                                cost.tensor_bytes));
  }
  int64_t completed = 0;
  for (const lg::LevelSummary& s : summaries) completed += s.completed;
  return ok && completed > 0 ? 0 : kExitFailure;
}
