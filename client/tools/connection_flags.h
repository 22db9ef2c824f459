// Command-line flags shared by attn_cli and attn_loadgen for reaching a
// server (address, TLS, bearer token, load balancing, message limits, streaming), and the
// ClientOptions they describe. Each tool adds its own --timeout, whose
// meaning differs (a call's deadline vs. how long a load level may drain).
#ifndef ATTN_CLIENT_TOOLS_CONNECTION_FLAGS_H_
#define ATTN_CLIENT_TOOLS_CONNECTION_FLAGS_H_

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "attn/client/attention_client.h"
#include "attn/command_line.h"

namespace attn::tools {

// ClientOptions from the connection flags; rpc_timeout is left to the tool.
// --token_file adds `authorization: Bearer <its first token>` to every call.
// INVALID_ARGUMENT naming the flag when the token file is unusable.
absl::StatusOr<ClientOptions> ClientOptionsFromFlags();

// The command line of a client tool (attn::ParseCommandLine): --help lists
// the tool's own flags, those of its main.cc and of this library, rather
// than every linked library's.
CommandLineSpec ToolCommandLine(absl::string_view program, absl::string_view usage);

}  // namespace attn::tools

#endif  // ATTN_CLIENT_TOOLS_CONNECTION_FLAGS_H_
