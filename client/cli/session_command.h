// `attn_cli session`: a short decode on the server's KV-cache sessions —
// N sessions prefilled in chunks and then decoded token by token, each step
// one AttendSessions call per layer for all N — with its latency, the bytes
// it put on the wire per generated token, and with --check every output
// compared with float64 attention over the session's whole history. With
// `batches` > 1 the sessions are split into that many independent batches,
// each stepped by a thread of its own (batches in flight, as a serving
// engine overlaps micro-batches), and tokens/s is over the decode phase's
// wall time.
#ifndef ATTN_CLIENT_CLI_SESSION_COMMAND_H_
#define ATTN_CLIENT_CLI_SESSION_COMMAND_H_

#include <cstdint>
#include <optional>
#include <ostream>

#include "attn/client/attention_client.h"

namespace attn::cli {

struct SessionCommandOptions {
  int64_t layers = 2, heads = 8, kv_heads = 2, head_dim = 64;  // bf16
  int64_t sessions = 2;
  int64_t prompt = 100;  // tokens prefilled per session, in chunks of `chunk`
  int64_t chunk = 64;
  int64_t generate = 16;  // decode steps (one token per session each)
  int64_t batches = 1;    // independent batches in flight, 1 to `sessions`
  bool check = false;
  // --check: the largest accepted absolute error of an output element (and
  // of the LSE / 8) against float64.
  double tolerance = 1e-2;
  std::optional<uint64_t> seed;  // of the random tokens; unset: a fresh one
};

// Returns an exit code (exit_codes.h): kExitCheckFailed when --check finds
// an error above the tolerance.
int RunSession(AttentionClient& client, const SessionCommandOptions& options, std::ostream& out,
               std::ostream& err);

}  // namespace attn::cli

#endif  // ATTN_CLIENT_CLI_SESSION_COMMAND_H_
