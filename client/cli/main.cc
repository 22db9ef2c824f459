// attn_cli: call an attnserve server from a shell.
//
//   attn_cli attend  [--shape=B,S,H,D [--kv_shape=B,Skv,Hkv,D] --dtype=bf16 |
//                     --q=q.npy --k=k.npy --v=v.npy]
//                    [--causal] [--window=L,R] [--lse] [--lse_out=lse.npy]
//                    [--cu_seqlens_q=0,... --cu_seqlens_k=0,...]
//                    [--out=o.npy] [--check] [--repeat=N] [--kernel=NAME]
//                    [--shared_memory=system]
//   attn_cli session [--session_shape=L,H,Hkv,D] [--sessions=N] [--prompt=P]
//                    [--chunk=C] [--generate=G] [--batches=N] [--check]
//   attn_cli kernels [--json]
//   attn_cli info    [--json]
//   attn_cli stats   [--json]
//   attn_cli health  [--service=NAME]     exit 0 only when SERVING
//
// Every subcommand takes --address (default localhost:50051) and fails
// within --connect_timeout when nothing answers there.
#include <cstdint>
#include <iostream>
#include <string>
#include <utility>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_split.h"
#include "absl/time/time.h"
#include "attend_command.h"
#include "attn/client/attention_client.h"
#include "attn/command_line.h"
#include "connection_flags.h"
#include "exit_codes.h"
#include "large_allocations.h"
#include "problem_flags.h"
#include "query_commands.h"
#include "session_command.h"

ABSL_FLAG(absl::Duration, timeout, absl::Seconds(60), "Deadline of each call.");

ABSL_FLAG(std::string, shape, "1,128,4,64",
          "attend: B,S,H,D (batch, seq_len, num_heads, head_dim) of random inputs.");
// --kv_shape, --causal, --window, --lse, --cu_seqlens_q/_k, --seqlens_q/_k:
// problem_flags.h.
ABSL_FLAG(std::string, lse_out, "",
          "attend: write the LSE here as float32 .npy, [B, H, S] (varlen [H, total_q]); implies "
          "--lse.");
ABSL_FLAG(std::string, dtype, "",
          "attend: bf16 or fp16. Default: the .npy files' dtype, else bf16. Converts float32/64 "
          ".npy inputs.");
ABSL_FLAG(std::string, q, "",
          "attend: Q as .npy [B,S,H,D] (fp16 '<f2', bf16 '<V2' as saved "
          "with ml_dtypes, or float32 with --dtype); varlen: [total_q,H,D].");
ABSL_FLAG(std::string, k, "", "attend: K as .npy [B,Skv,Hkv,D]; varlen: [total_k,Hkv,D].");
ABSL_FLAG(std::string, v, "", "attend: V as .npy, K's shape.");
ABSL_FLAG(std::string, out, "", "attend: write the output here as .npy.");
ABSL_FLAG(int64_t, seed, -1, "attend, session: seed of the random inputs; -1 = a fresh one.");
ABSL_FLAG(std::string, kernel, "", "attend: kernel to run (see `kernels`); empty = default.");
ABSL_FLAG(double, scale, 0.0, "attend: softmax scale; 0 = 1/sqrt(head_dim).");
ABSL_FLAG(std::string, transport, "auto", "attend: auto, unary or stream.");
ABSL_FLAG(int, repeat, 1, "attend: calls of the same request (median/min/max reported).");
ABSL_FLAG(std::string, shared_memory, "none",
          "attend: none, or system: put the tensors in a POSIX shared-memory object registered "
          "with the server and send them by reference (a server on this host started with "
          "--allow_shared_memory).");
ABSL_FLAG(bool, check, false,
          "attend, session: compare with a float64 reference computed here; exit 3 above "
          "--tolerance.");
ABSL_FLAG(double, tolerance, attn::cli::kDefaultTolerance,
          "attend --check: largest accepted relative L2 error; session --check: largest accepted "
          "absolute error of an output element.");
ABSL_FLAG(std::string, session_shape, "2,8,2,64",
          "session: L,H,Hkv,D (layers, query heads, key/value heads, head_dim) of each bf16 "
          "session.");
ABSL_FLAG(int64_t, sessions, 2, "session: sessions stepped together (one call per layer).");
ABSL_FLAG(int64_t, prompt, 100, "session: tokens prefilled per session.");
ABSL_FLAG(int64_t, chunk, 64, "session: prefill chunk (tokens per session per call).");
ABSL_FLAG(int64_t, generate, 16, "session: decode steps, one token per session each.");
ABSL_FLAG(int64_t, batches, 1,
          "session: independent batches the sessions are dealt into, each stepped by a thread of "
          "its own (batches in flight), 1 to --sessions.");
ABSL_FLAG(int64_t, check_rows, 256,
          "attend --check: query rows compared per (batch, head), evenly spaced; 0 = all "
          "(the float64 reference costs O(S^2 D) per head when complete).");
ABSL_FLAG(bool, json, false, "kernels, info, stats: print the response as JSON.");
ABSL_FLAG(std::string, service, "", "health: service to check; empty = the whole server.");

namespace {

constexpr char kUsage[] =
    "Calls an attnserve server.\n\n"
    "usage: attn_cli <command> [flags]\n\n"
    "commands:\n"
    "  attend   run attention on random or .npy inputs; prints the timing breakdown\n"
    "  session  prefill and decode KV-cache sessions on the server (sends new tokens only)\n"
    "  kernels  list the server's kernels\n"
    "  info     server version, backend, devices and limits\n"
    "  stats    server counters and average phase times\n"
    "  health   grpc.health.v1 check; exit 0 only when SERVING\n\n"
    "exit status: 0 ok, 1 failure (unreachable server, RPC error, NOT_SERVING), 2 usage,\n"
    "3 attend/session --check above tolerance.\n\n"
    "examples:\n"
    "  attn_cli attend --address=gpu-node:50051 --shape=1,4096,16,128 --check\n"
    "  attn_cli attend --q=q.npy --k=k.npy --v=v.npy --out=o.npy\n"
    "  attn_cli attend --shape=2,1000,32,128 --kv_shape=2,1000,8,128 --causal --lse --check\n"
    "  attn_cli attend --shape=1,1,8,64 --cu_seqlens_q=0,100,350 --cu_seqlens_k=0,100,350 "
    "--window=128,0\n"
    "  attn_cli attend --address=unix:///run/attn.sock --shape=1,4096,16,128 "
    "--shared_memory=system\n"
    "  attn_cli session --session_shape=4,32,8,128 --prompt=512 --generate=32 --check\n"
    "  attn_cli health --address=localhost:50051";

absl::StatusOr<attn::ClientOptions> ClientOptionsFromFlags() {
  absl::StatusOr<attn::ClientOptions> options = attn::tools::ClientOptionsFromFlags();
  if (options.ok()) options->rpc_timeout = absl::GetFlag(FLAGS_timeout);
  return options;
}

// Fills `options` from the attend flags; false (after printing why) when a
// value is malformed.
bool AttendOptionsFromFlags(attn::cli::AttendCommandOptions* options) {
  if (!attn::tools::ParseShapeFlag(absl::GetFlag(FLAGS_shape), &options->shape)) {
    std::cerr << "attend: --shape must be B,S,H,D (four integers), got '"
              << absl::GetFlag(FLAGS_shape) << "'\n";
    return false;
  }
  absl::StatusOr<attn::tools::ProblemFlagValues> problem = attn::tools::ProblemFlagsFromFlags();
  if (!problem.ok()) {
    std::cerr << "attend: " << problem.status().message() << "\n";
    return false;
  }
  problem->ApplyTo(&options->call);
  options->kv_shape = problem->kv_shape;
  options->cu_seqlens_q = problem->cu_seqlens_q;
  options->cu_seqlens_k = problem->cu_seqlens_k;
  options->lse_out_path = absl::GetFlag(FLAGS_lse_out);
  const std::string dtype = absl::GetFlag(FLAGS_dtype);
  if (!dtype.empty()) {
    attn::DType parsed;
    if (!attn::ParseDType(dtype, &parsed)) {
      std::cerr << "attend: --dtype must be bf16 or fp16, got '" << dtype << "'\n";
      return false;
    }
    options->dtype = parsed;
  }
  const std::string transport = absl::GetFlag(FLAGS_transport);
  if (transport == "auto") {
    options->call.transport = attn::Transport::kAuto;
  } else if (transport == "unary") {
    options->call.transport = attn::Transport::kUnary;
  } else if (transport == "stream") {
    options->call.transport = attn::Transport::kStream;
  } else {
    std::cerr << "attend: --transport must be auto, unary or stream, got '" << transport << "'\n";
    return false;
  }
  options->q_path = absl::GetFlag(FLAGS_q);
  options->k_path = absl::GetFlag(FLAGS_k);
  options->v_path = absl::GetFlag(FLAGS_v);
  options->out_path = absl::GetFlag(FLAGS_out);
  if (absl::GetFlag(FLAGS_seed) >= 0) options->seed = absl::GetFlag(FLAGS_seed);
  options->call.kernel = absl::GetFlag(FLAGS_kernel);
  if (absl::GetFlag(FLAGS_scale) != 0.0) {
    options->call.softmax_scale = static_cast<float>(absl::GetFlag(FLAGS_scale));
  }
  options->repeat = absl::GetFlag(FLAGS_repeat);
  const std::string shared_memory = absl::GetFlag(FLAGS_shared_memory);
  if (shared_memory != "none" && shared_memory != "system") {
    std::cerr << "attend: --shared_memory must be none or system, got '" << shared_memory
              << "'\n";
    return false;
  }
  options->system_shared_memory = shared_memory == "system";
  options->check = absl::GetFlag(FLAGS_check);
  options->tolerance = absl::GetFlag(FLAGS_tolerance);
  options->check_rows = absl::GetFlag(FLAGS_check_rows);
  return true;
}

// Fills `options` from the session flags; false (after printing why) when a
// value is malformed.
bool SessionOptionsFromFlags(attn::cli::SessionCommandOptions* options) {
  std::vector<int64_t> shape;
  for (absl::string_view part : absl::StrSplit(absl::GetFlag(FLAGS_session_shape), ',')) {
    int64_t value = 0;
    if (!absl::SimpleAtoi(part, &value) || value < 1) {
      shape.clear();
      break;
    }
    shape.push_back(value);
  }
  if (shape.size() != 4) {
    std::cerr << "session: --session_shape must be L,H,Hkv,D (four positive integers), got '"
              << absl::GetFlag(FLAGS_session_shape) << "'\n";
    return false;
  }
  options->layers = shape[0];
  options->heads = shape[1];
  options->kv_heads = shape[2];
  options->head_dim = shape[3];
  options->sessions = absl::GetFlag(FLAGS_sessions);
  options->prompt = absl::GetFlag(FLAGS_prompt);
  options->chunk = absl::GetFlag(FLAGS_chunk);
  options->generate = absl::GetFlag(FLAGS_generate);
  options->batches = absl::GetFlag(FLAGS_batches);
  if (options->sessions < 1 || options->prompt < 0 || options->chunk < 1 ||
      options->generate < 0 || options->prompt + options->generate < 1) {
    std::cerr << "session: --sessions and --chunk must be >= 1, --prompt and --generate >= 0 "
                 "and not both 0\n";
    return false;
  }
  if (options->batches < 1 || options->batches > options->sessions) {
    std::cerr << "session: --batches is " << options->batches << "; it must be 1 to --sessions ("
              << options->sessions << ")\n";
    return false;
  }
  options->check = absl::GetFlag(FLAGS_check);
  options->tolerance = absl::GetFlag(FLAGS_tolerance);
  if (absl::GetFlag(FLAGS_seed) >= 0) options->seed = absl::GetFlag(FLAGS_seed);
  return true;
}

}  // namespace

int main(int argc, char** argv) {
  attn::tools::KeepLargeAllocationsInTheHeap();
  const std::vector<char*> args =
      attn::ParseCommandLine(argc, argv, attn::tools::ToolCommandLine("attn_cli", kUsage));
  if (args.size() != 2) {
    std::cerr << (args.size() < 2 ? "attn_cli: missing command" : "attn_cli: too many arguments")
              << "\n\n"
              << kUsage << "\n";
    return attn::cli::kExitUsage;
  }
  const std::string command = args[1];
  if (command != "attend" && command != "session" && command != "kernels" && command != "info" &&
      command != "stats" && command != "health") {
    std::cerr << "attn_cli: unknown command '" << command << "'\n\n" << kUsage << "\n";
    return attn::cli::kExitUsage;
  }
  attn::cli::AttendCommandOptions attend;
  if (command == "attend" && !AttendOptionsFromFlags(&attend)) return attn::cli::kExitUsage;
  attn::cli::SessionCommandOptions session;
  if (command == "session" && !SessionOptionsFromFlags(&session)) return attn::cli::kExitUsage;

  absl::StatusOr<attn::ClientOptions> flag_options = ClientOptionsFromFlags();
  if (!flag_options.ok()) {
    std::cerr << command << ": " << flag_options.status().message() << "\n";
    return attn::cli::kExitFailure;
  }
  attn::ClientOptions options = *std::move(flag_options);
  // Only `info` and `attend` use the server info; health must not depend on
  // anything but the health service.
  options.fetch_server_info = command == "attend" || command == "info";
  absl::StatusOr<std::unique_ptr<attn::AttentionClient>> client =
      attn::AttentionClient::Connect(options);
  if (!client.ok()) {
    std::cerr << command << ": " << client.status().ToString() << "\n";
    return attn::cli::kExitFailure;
  }

  const bool json = absl::GetFlag(FLAGS_json);
  if (command == "attend") return attn::cli::RunAttend(**client, attend, std::cout, std::cerr);
  if (command == "session") return attn::cli::RunSession(**client, session, std::cout, std::cerr);
  if (command == "kernels") return attn::cli::RunKernels(**client, json, std::cout, std::cerr);
  if (command == "info") return attn::cli::RunInfo(**client, json, std::cout, std::cerr);
  if (command == "stats") return attn::cli::RunStats(**client, json, std::cout, std::cerr);
  return attn::cli::RunHealth(**client, absl::GetFlag(FLAGS_service), std::cout, std::cerr);
}
