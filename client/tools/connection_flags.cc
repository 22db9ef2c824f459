#include "connection_flags.h"

#include <cstdint>
#include <string>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/time/time.h"
#include "attn/token_file.h"

ABSL_FLAG(std::string, address, "localhost:50051",
          "attnserve server: host:port, or any gRPC target (e.g. dns:///name:port, unix:/path).");
ABSL_FLAG(absl::Duration, connect_timeout, absl::Seconds(5),
          "Give up when the server is not reachable within this time.");
ABSL_FLAG(bool, tls, false, "Use TLS (the other --tls_* flags imply it).");
ABSL_FLAG(std::string, tls_ca, "", "PEM root certificates for the server's certificate.");
ABSL_FLAG(std::string, tls_cert, "", "PEM client certificate chain (mutual TLS).");
ABSL_FLAG(std::string, tls_key, "", "PEM client private key (mutual TLS).");
ABSL_FLAG(std::string, tls_server_name, "", "Name expected in the server's certificate.");
ABSL_FLAG(std::string, token_file, "",
          "File whose first token (attn_server's --token_file format: one per line) is sent "
          "as 'authorization: Bearer <token>' with every call.");
ABSL_FLAG(std::string, lb_policy, "",
          "gRPC load balancing, e.g. round_robin over every address of a dns:/// target.");
ABSL_FLAG(int64_t, max_message_bytes, attn::kMaxGrpcMessageBytes,
          "Client send and receive limit per message (gRPC's own default receive limit is "
          "4 MiB; -1 = unlimited).");
ABSL_FLAG(int64_t, stream_threshold_bytes, 0,
          "Stream requests larger than this; 0 = the server's message limit.");
ABSL_FLAG(int64_t, stream_chunk_bytes, int64_t{4} << 20, "Bytes per streamed chunk.");
ABSL_FLAG(int, connections, 0,
          "TCP connections one client spreads its calls over; 0 = the library's default "
          "(attn::ClientOptions::kDefaultConnections).");
ABSL_FLAG(int64_t, split_calls_above_bytes, attn::ClientOptions::kDefaultSplitCallsAboveBytes,
          "Split a unary call whose Q, K and V exceed this many bytes into shards (along the "
          "batch, else the KV heads) sent in parallel on idle connections; 0 = never split.");
ABSL_FLAG(int, http2_max_frame_bytes, attn::Http2Tuning{}.max_frame_bytes,
          "HTTP/2 SETTINGS_MAX_FRAME_SIZE this client advertises (0 = gRPC's default, 16 KiB).");
ABSL_FLAG(int, http2_stream_window_bytes, attn::Http2Tuning{}.stream_window_bytes,
          "Initial HTTP/2 stream receive window (0 = gRPC's default, 64 KiB).");
ABSL_FLAG(int, tcp_read_chunk_bytes, attn::Http2Tuning{}.read_chunk_bytes,
          "First socket read size (0 = gRPC's default, 8 KiB).");

namespace attn::tools {

absl::StatusOr<ClientOptions> ClientOptionsFromFlags() {
  ClientOptions options;
  options.address = absl::GetFlag(FLAGS_address);
  options.connect_timeout = absl::GetFlag(FLAGS_connect_timeout);
  options.tls.root_certs_path = absl::GetFlag(FLAGS_tls_ca);
  options.tls.cert_chain_path = absl::GetFlag(FLAGS_tls_cert);
  options.tls.private_key_path = absl::GetFlag(FLAGS_tls_key);
  options.tls.server_name_override = absl::GetFlag(FLAGS_tls_server_name);
  options.tls.enabled = absl::GetFlag(FLAGS_tls) || !options.tls.root_certs_path.empty() ||
                        !options.tls.cert_chain_path.empty();
  options.load_balancing_policy = absl::GetFlag(FLAGS_lb_policy);
  options.max_receive_message_bytes = absl::GetFlag(FLAGS_max_message_bytes);
  options.max_send_message_bytes = absl::GetFlag(FLAGS_max_message_bytes);
  options.stream_threshold_bytes = absl::GetFlag(FLAGS_stream_threshold_bytes);
  options.stream_chunk_bytes = absl::GetFlag(FLAGS_stream_chunk_bytes);
  options.connections = absl::GetFlag(FLAGS_connections);
  options.split_calls_above_bytes = absl::GetFlag(FLAGS_split_calls_above_bytes);
  options.http2.max_frame_bytes = absl::GetFlag(FLAGS_http2_max_frame_bytes);
  options.http2.stream_window_bytes = absl::GetFlag(FLAGS_http2_stream_window_bytes);
  options.http2.read_chunk_bytes = absl::GetFlag(FLAGS_tcp_read_chunk_bytes);
  if (const std::string path = absl::GetFlag(FLAGS_token_file); !path.empty()) {
    absl::StatusOr<std::vector<std::string>> tokens = ReadTokenFile(path, "--token_file");
    if (!tokens.ok()) return tokens.status();
    options.metadata.emplace_back("authorization", "Bearer " + tokens->front());
  }
  return options;
}

CommandLineSpec ToolCommandLine(absl::string_view program, absl::string_view usage) {
  CommandLineSpec spec;
  spec.program = std::string(program);
  spec.usage = std::string(usage);
  // A binary links one main.cc.
  spec.help_files = {"/main.cc", "client/tools/connection_flags.cc",
                     "client/tools/problem_flags.cc"};
  return spec;
}

}  // namespace attn::tools
