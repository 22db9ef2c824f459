// attn_cli's query subcommands: `kernels`, `info`, `stats` and `health`.
// Each prints a human-readable report (or the proto as JSON) and returns an
// exit code (exit_codes.h).
#ifndef ATTN_CLIENT_CLI_QUERY_COMMANDS_H_
#define ATTN_CLIENT_CLI_QUERY_COMMANDS_H_

#include <ostream>
#include <string>

#include "attn/client/attention_client.h"

namespace attn::cli {

// The server's kernels, one per line, in ladder order.
int RunKernels(AttentionClient& client, bool json, std::ostream& out, std::ostream& err);
// Version, backend, devices and limits.
int RunInfo(AttentionClient& client, bool json, std::ostream& out, std::ostream& err);
// Cumulative counters and average phase times since the server started.
int RunStats(AttentionClient& client, bool json, std::ostream& out, std::ostream& err);
// grpc.health.v1 Check of `service`; prints the status. kExitOk only for
// SERVING.
int RunHealth(AttentionClient& client, const std::string& service, std::ostream& out,
              std::ostream& err);

}  // namespace attn::cli

#endif  // ATTN_CLIENT_CLI_QUERY_COMMANDS_H_
