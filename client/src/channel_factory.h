// Builds the gRPC channel an AttentionClient talks over: credentials from
// TlsOptions, message limits raised to ClientOptions' values.
#ifndef ATTN_CLIENT_SRC_CHANNEL_FACTORY_H_
#define ATTN_CLIENT_SRC_CHANNEL_FACTORY_H_

#include <memory>

#include "absl/status/statusor.h"
#include "attn/client/client_options.h"
#include "grpcpp/channel.h"

namespace attn::internal {

// gRPC's first reconnect backoff on our channels (its default: 1 s), so a
// failed connection attempt is retried a few times within Connect's grace
// for failing attempts, and a dropped connection comes back sooner.
inline constexpr int kInitialReconnectBackoffMs = 250;

// INVALID_ARGUMENT when a TLS file cannot be read or only one of the client
// certificate and key is given. Does not connect.
absl::StatusOr<std::shared_ptr<grpc::Channel>> CreateChannel(const ClientOptions& options);

}  // namespace attn::internal

#endif  // ATTN_CLIENT_SRC_CHANNEL_FACTORY_H_
