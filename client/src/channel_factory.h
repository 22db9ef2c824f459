// Builds the gRPC channel an AttentionClient talks over: credentials from
// TlsOptions, message limits raised to ClientOptions' values.
#ifndef ATTN_CLIENT_SRC_CHANNEL_FACTORY_H_
#define ATTN_CLIENT_SRC_CHANNEL_FACTORY_H_

#include <memory>

#include "absl/status/statusor.h"
#include "attn/client/client_options.h"
#include "grpcpp/channel.h"

namespace attn::internal {

// INVALID_ARGUMENT when a TLS file cannot be read or only one of the client
// certificate and key is given. Does not connect.
absl::StatusOr<std::shared_ptr<grpc::Channel>> CreateChannel(const ClientOptions& options);

}  // namespace attn::internal

#endif  // ATTN_CLIENT_SRC_CHANNEL_FACTORY_H_
