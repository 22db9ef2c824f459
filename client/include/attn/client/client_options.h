// attn/client/client_options.h
//
// How an AttentionClient reaches its server: address, TLS, timeouts, message
// size limits and the size above which Attend streams.
//
// The defaults are chosen for attnserve's payloads (one fp16/bf16 tensor of
// B·S·H·D elements is easily tens of MiB): gRPC's own default receive limit
// of 4 MiB, the most common complaint against tensor-serving clients, is
// raised to the protocol's ceiling (2 GiB − 1) in both directions, and calls
// whose request would not fit one message go over the chunked AttendStream
// RPC instead of failing.
#ifndef ATTN_CLIENT_CLIENT_OPTIONS_H_
#define ATTN_CLIENT_CLIENT_OPTIONS_H_

#include <cstdint>
#include <limits>
#include <string>
#include <utility>
#include <vector>

#include "absl/time/time.h"
#include "attn/http2_tuning.h"

namespace attn {

// The largest message gRPC can carry: its length fields are 32-bit signed.
inline constexpr int64_t kMaxGrpcMessageBytes = std::numeric_limits<int32_t>::max();

// Transport security. Disabled: plaintext (insecure) channel.
struct TlsOptions {
  bool enabled = false;
  // PEM file with the root certificates that sign the server's certificate.
  // Empty: gRPC's default roots (GRPC_DEFAULT_SSL_ROOTS_FILE_PATH or the
  // bundled set).
  std::string root_certs_path;
  // PEM certificate chain and private key of this client, for servers that
  // require mutual TLS. Both or neither.
  std::string cert_chain_path;
  std::string private_key_path;
  // Name expected in the server's certificate when it differs from the
  // address's host (test certificates, IP addresses).
  std::string server_name_override;
};

struct ClientOptions {
  // gRPC target: "host:port", "ipv4:127.0.0.1:50051", "unix:/path", or any
  // target URI gRPC resolves.
  std::string address = "localhost:50051";
  TlsOptions tls;

  // Connect() fails with UNAVAILABLE when the channel is not ready within
  // this time, so a wrong address is reported instead of waited on.
  absl::Duration connect_timeout = absl::Seconds(5);
  // Deadline of each call unless the call sets its own.
  absl::Duration rpc_timeout = absl::Seconds(60);

  // Channel message limits, in bytes; -1 means unlimited (gRPC still caps a
  // message at kMaxGrpcMessageBytes).
  int64_t max_receive_message_bytes = kMaxGrpcMessageBytes;
  int64_t max_send_message_bytes = kMaxGrpcMessageBytes;

  // Attend requests whose encoded size exceeds this go over AttendStream.
  // 0: the server's advertised max_message_bytes (from GetServerInfo at
  // Connect), capped by max_send_message_bytes; 64 MiB when unknown.
  int64_t stream_threshold_bytes = 0;
  // Payload bytes per TensorChunk message when streaming.
  int64_t stream_chunk_bytes = int64_t{4} << 20;

  // Connect() calls GetServerInfo and caches the result (the limits decide
  // when to stream). Off for callers that only probe health.
  bool fetch_server_info = true;

  // gRPC load-balancing policy, e.g. "round_robin" to spread calls over every
  // address a "dns:///" target resolves to (one pod per GPU behind a
  // headless Kubernetes service). Empty: gRPC's default, pick_first.
  std::string load_balancing_policy;

  // Give this client its own TCP connection instead of sharing one with
  // other clients of the same target in this process. Load generators open
  // several clients this way to spread traffic over connections.
  bool dedicated_connection = false;

  // TCP connections this client spreads its Attend calls over (round robin;
  // the other RPCs use the first). One HTTP/2 connection is served by one
  // thread at a time at each end, so tensor-sized calls at high concurrency
  // need several. The first connects in Connect(), each other one on its
  // first call. 0: kDefaultConnections.
  int connections = 0;
  static constexpr int kDefaultConnections = 8;
  int ConnectionCount() const { return connections > 0 ? connections : kDefaultConnections; }

  // Unary Attend calls whose inline Q, K and V together exceed this many
  // bytes are split into shards that travel on different connections in
  // parallel, when some of this client's connections are idle (fewer calls
  // in flight than connections): one HTTP/2 connection carries ~2 GB/s, so a
  // large call at low concurrency is bound by the one it uses. Not when
  // the server has one worker (ServerInfo limits.workers, with
  // fetch_server_info): it would run the shards in turn, slower than the
  // whole call. Along the
  // batch, else along KV-head groups; the output is byte-identical to the
  // unsplit call's (AttendOptions::allow_split, ClientTiming::shards).
  // Varlen, region and streamed calls are never split. 0: never split.
  // 2 MiB: on the H200 host at concurrency 1, splitting calls of 3 and 6 MiB
  // (B=1, H=16, d=128 bf16, S=256 and 512) gave 1.8x and 2.2-2.5x the
  // requests/s of whole calls (bench/RESULTS.md, 2026-12-02 second run).
  int64_t split_calls_above_bytes = kDefaultSplitCallsAboveBytes;
  static constexpr int64_t kDefaultSplitCallsAboveBytes = int64_t{2} << 20;

  // HTTP/2 frame, window and socket-read sizes (the server's defaults too).
  Http2Tuning http2;

  // Metadata sent with every call, e.g. {"authorization", "Bearer ..."}.
  std::vector<std::pair<std::string, std::string>> metadata;
};

}  // namespace attn

#endif  // ATTN_CLIENT_CLIENT_OPTIONS_H_
