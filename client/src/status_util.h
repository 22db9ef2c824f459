// grpc::Status -> absl::Status for the client, with hints for the failures
// users of tensor-serving clients hit most (unreachable server, message
// size limits).
#ifndef ATTN_CLIENT_SRC_STATUS_UTIL_H_
#define ATTN_CLIENT_SRC_STATUS_UTIL_H_

#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "grpcpp/support/status.h"

namespace attn::internal {

// The same code (absl and gRPC share the numbers) with the message
// "<rpc> to <address>: <message>", plus a hint for a message-size rejection
// or a connection failure.
absl::Status FromGrpcStatus(const grpc::Status& status, absl::string_view rpc,
                            absl::string_view address);

}  // namespace attn::internal

#endif  // ATTN_CLIENT_SRC_STATUS_UTIL_H_
