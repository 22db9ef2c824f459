#include "channel_factory.h"

#include <climits>
#include <string>

#include "absl/strings/str_cat.h"
#include "file_io.h"
#include "grpcpp/create_channel.h"
#include "grpcpp/security/credentials.h"
#include "grpcpp/support/channel_arguments.h"

namespace attn::internal {
namespace {

absl::StatusOr<std::string> ReadFile(const std::string& path, const char* what) {
  absl::StatusOr<std::string> contents = ReadWholeFile(path);
  if (!contents.ok()) {
    return absl::InvalidArgumentError(absl::StrCat(what, ": ", contents.status().message()));
  }
  return contents;
}

// gRPC takes limits as int: -1 is unlimited, anything larger than INT_MAX is
// clamped (the transport cannot carry more anyway).
int ClampLimit(int64_t bytes) {
  if (bytes < 0) return -1;
  return bytes > INT_MAX ? INT_MAX : static_cast<int>(bytes);
}

absl::StatusOr<std::shared_ptr<grpc::ChannelCredentials>> MakeCredentials(
    const TlsOptions& tls) {
  if (!tls.enabled) return grpc::InsecureChannelCredentials();
  if (tls.cert_chain_path.empty() != tls.private_key_path.empty()) {
    return absl::InvalidArgumentError(
        "TLS: the client certificate chain and private key must be given together");
  }
  grpc::SslCredentialsOptions ssl;
  if (!tls.root_certs_path.empty()) {
    absl::StatusOr<std::string> roots = ReadFile(tls.root_certs_path, "TLS root certificates");
    if (!roots.ok()) return roots.status();
    ssl.pem_root_certs = *std::move(roots);
  }
  if (!tls.cert_chain_path.empty()) {
    absl::StatusOr<std::string> chain = ReadFile(tls.cert_chain_path, "TLS certificate chain");
    if (!chain.ok()) return chain.status();
    absl::StatusOr<std::string> key = ReadFile(tls.private_key_path, "TLS private key");
    if (!key.ok()) return key.status();
    ssl.pem_cert_chain = *std::move(chain);
    ssl.pem_private_key = *std::move(key);
  }
  return grpc::SslCredentials(ssl);
}

}  // namespace

absl::StatusOr<std::shared_ptr<grpc::Channel>> CreateChannel(const ClientOptions& options) {
  if (options.address.empty()) return absl::InvalidArgumentError("address is empty");
  absl::StatusOr<std::shared_ptr<grpc::ChannelCredentials>> credentials =
      MakeCredentials(options.tls);
  if (!credentials.ok()) return credentials.status();

  grpc::ChannelArguments args;
  args.SetMaxReceiveMessageSize(ClampLimit(options.max_receive_message_bytes));
  args.SetMaxSendMessageSize(ClampLimit(options.max_send_message_bytes));
  if (options.tls.enabled && !options.tls.server_name_override.empty()) {
    args.SetSslTargetNameOverride(options.tls.server_name_override);
  }
  if (!options.load_balancing_policy.empty()) {
    args.SetLoadBalancingPolicyName(options.load_balancing_policy);
  }
  if (options.dedicated_connection || options.ConnectionCount() > 1) {
    // Channels share TCP connections (subchannels) through a global pool
    // keyed by target and arguments; a local pool gives this one its own.
    args.SetInt(GRPC_ARG_USE_LOCAL_SUBCHANNEL_POOL, 1);
  }
  for (const auto& [name, value] : options.http2.ChannelArgs()) args.SetInt(name, value);
  // gRPC's default first reconnect backoff is 1 s: Connect's wait after a
  // failed attempt (kFailedAttemptsGrace) sees a few retries instead of one.
  args.SetInt(GRPC_ARG_INITIAL_RECONNECT_BACKOFF_MS, kInitialReconnectBackoffMs);
  args.SetString(GRPC_ARG_PRIMARY_USER_AGENT_STRING, "attnserve-cpp-client");
  return grpc::CreateCustomChannel(options.address, *credentials, args);
}

}  // namespace attn::internal
