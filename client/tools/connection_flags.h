// Command-line flags shared by attn_cli and attn_loadgen for reaching a
// server (address, TLS, load balancing, message limits, streaming), and the
// ClientOptions they describe. Each tool adds its own --timeout, whose
// meaning differs (a call's deadline vs. how long a load level may drain).
#ifndef ATTN_CLIENT_TOOLS_CONNECTION_FLAGS_H_
#define ATTN_CLIENT_TOOLS_CONNECTION_FLAGS_H_

#include "absl/strings/string_view.h"
#include "attn/client/attention_client.h"

namespace attn::tools {

// ClientOptions from the connection flags; rpc_timeout is left to the tool.
ClientOptions ClientOptionsFromFlags();

// Sets the tool's usage message and makes --help list the tool's own flags
// (those of its main.cc and of this library) rather than every linked
// library's. Call before absl::ParseCommandLine.
void SetToolUsage(absl::string_view usage);

}  // namespace attn::tools

#endif  // ATTN_CLIENT_TOOLS_CONNECTION_FLAGS_H_
