// attn_server: the attnserve gRPC service. Flags become a ServerOptions;
// SIGTERM or SIGINT drains the server and exits 0 (a second one exits 1 at
// once).
#include <signal.h>
#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <string>
#include <thread>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/status/statusor.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "absl/time/time.h"
#include "attn/command_line.h"
#include "backends/heap_arena.h"
#include "core/log.h"
#include "security/exposure_policy.h"
#include "server.h"
#include "core/server_options.h"

#ifdef ATTN_HAVE_PINNED_HEAP
#include "pinned_heap/pinned_heap.h"
#endif

using attn::server::BackendChoice;
using attn::server::LogLevel;

ABSL_FLAG(std::string, listen, "127.0.0.1:50051",
          "HOST:PORT to listen on; containers use 0.0.0.0:50051. Port 0 picks a free port "
          "(see --port_file).");
ABSL_FLAG(std::string, listen_unix, "",
          "Also listen on this unix-domain socket path (clients dial unix:PATH), for same-host "
          "clients; empty = no unix socket.");
ABSL_FLAG(bool, allow_shared_memory, false,
          "Let same-host clients pass tensors in shared-memory regions (POSIX shm, and CUDA IPC "
          "on the CUDA backend) instead of messages: HoldRegions/RegisterRegion in "
          "attention.proto. Callers must be on a unix socket or loopback.");
ABSL_FLAG(int, max_regions_per_lease, attn::server::ServerOptions{}.max_regions_per_lease,
          "Shared-memory regions one client lease may hold at once.");
ABSL_FLAG(int64_t, kv_cache_bytes, attn::server::ServerOptions{}.kv_cache_bytes,
          "Bytes of the KV-cache page pool of sessions (HoldSessions; the CPU backend's host "
          "memory); 0 turns sessions off.");
ABSL_FLAG(double, kv_cache_memory_fraction,
          attn::server::ServerOptions{}.kv_cache_memory_fraction,
          "CUDA backend: the KV-cache page pool takes this fraction (0 to 0.95) of the device "
          "memory free after the streams' buffers, instead of --kv_cache_bytes; 0 = use "
          "--kv_cache_bytes.");
ABSL_FLAG(int64_t, kv_page_bytes, attn::server::ServerOptions{}.kv_page_bytes,
          "Bytes of one KV-cache page (K and V halves of one layer of one session).");
ABSL_FLAG(double, session_idle_timeout_s, attn::server::ServerOptions{}.session_idle_timeout_s,
          "Close a session after this many seconds without a call on it; 0 = never.");
ABSL_FLAG(int64_t, max_session_tokens, attn::server::ServerOptions{}.max_session_tokens,
          "Largest SessionConfig.max_tokens.");
ABSL_FLAG(int, max_steps_per_call, attn::server::ServerOptions{}.max_steps_per_call,
          "Most sessions one AttendSessions call may step.");
ABSL_FLAG(int, max_sessions_per_lease, attn::server::ServerOptions{}.max_sessions_per_lease,
          "Most sessions one lease may hold.");
ABSL_FLAG(std::string, port_file, "",
          "If set, write the bound port number and a newline to this file once the server "
          "reports SERVING.");
ABSL_FLAG(BackendChoice, backend, BackendChoice::kAuto,
          "auto|cuda|cpu|transport_only. auto picks cuda when this build has CUDA and a GPU "
          "of compute capability >= 8.0 is visible, else cpu. transport_only is a measurement "
          "mode: requests are checked but nothing is computed (outputs are NaN).");
ABSL_FLAG(std::string, devices, "",
          "CUDA device ordinals to serve on, e.g. \"0,1\"; empty = every usable device.");
ABSL_FLAG(int, streams_per_device, 2,
          "CUDA streams (each with a worker and its own preallocated buffers) per device.");
ABSL_FLAG(int64_t, max_message_bytes, int64_t{256} << 20,
          "Largest gRPC message accepted or sent, in bytes (at most 2147483647). A unary "
          "Attend request carries Q, K and V in one message; larger tensors use AttendStream.");
ABSL_FLAG(int64_t, max_tokens_per_request, int64_t{1} << 25,
          "Largest tensor a request may carry, in elements: Q (batch*seq_len*num_heads*"
          "head_dim) and each of K and V (batch*kv_seq_len*kv_num_heads*head_dim) on its "
          "own; varlen: packed tokens instead of batch*seq_len. Sizes the CUDA buffers "
          "allocated at start-up (Q, K, V, O of 2 bytes per element, plus LSE and "
          "cu_seqlens, per stream). The default fits B=4, S=4096, H=16, D=128.");
ABSL_FLAG(int, queue_capacity, 64,
          "Requests that may wait for a worker; beyond that new requests get "
          "RESOURCE_EXHAUSTED at once. Each waiting request holds its tensors in host memory.");
ABSL_FLAG(int64_t, max_stream_buffer_bytes, 0,
          "Bytes that AttendStream calls may hold at once (q, k, v as their chunks arrive, "
          "and the output), all calls together; beyond it RESOURCE_EXHAUSTED. 0 = room for "
          "four calls of the largest size.");
ABSL_FLAG(int64_t, max_admitted_bytes, 0,
          "Bytes that all admitted calls, Attend and AttendStream together, may hold at once "
          "(inputs and outputs of each, until its response is sent); beyond it "
          "RESOURCE_EXHAUSTED. 0 = room for eight calls of the largest size.");
ABSL_FLAG(double, max_peer_share, 0.5,
          "The most of --max_admitted_bytes and of --max_stream_buffer_bytes that one caller "
          "(a connection, or one token's identity when --token_file is set) may hold over "
          "several calls at once, in (0, 1]; its first call is admitted whenever it fits, so "
          "one caller's many calls cannot shut out the others. 1 = no share limit.");
ABSL_FLAG(double, stream_idle_timeout_s, 30.0,
          "AttendStream: seconds to wait for the client's next message while it uploads, or "
          "for it to take the next output chunk; then the call ends (DEADLINE_EXCEEDED) and "
          "its buffers are released.");
ABSL_FLAG(double, stream_upload_timeout_s, 300.0,
          "AttendStream: seconds from the call's start by which its input must be complete; "
          "then the call ends (DEADLINE_EXCEEDED) and its buffers are released.");
ABSL_FLAG(double, drain_upload_idle_s, 1.0,
          "On SIGTERM/SIGINT, once new calls are refused: an AttendStream upload that has "
          "received nothing for this many seconds ends at once (UNAVAILABLE); 0 ends every "
          "upload still in progress.");
ABSL_FLAG(int, max_concurrent_streams, 100,
          "Calls at once on one client connection (HTTP/2 MAX_CONCURRENT_STREAMS); more wait "
          "in the client.");
ABSL_FLAG(int, max_connections, 0,
          "Client connections open at once on a HOST:PORT --listen; one more is closed as soon "
          "as it is accepted (the client sees UNAVAILABLE), counted and logged. 0 = the "
          "open-file limit less 128 (or half of it), so connections alone never exhaust the "
          "server's file descriptors.");
ABSL_FLAG(int, copy_threads, attn::server::ServerOptions{}.copy_threads,
          "CUDA backend: helper threads that copy request tensors into pinned staging, shared "
          "by all streams (0 = each stream's worker copies alone).");
ABSL_FLAG(bool, streaming_staging, attn::server::ServerOptions{}.streaming_staging,
          "CUDA backend: copy requests of 16 MiB and more into pinned staging with streaming "
          "(non-temporal) stores, which bypass the CPU caches, instead of memcpy "
          "(--nostreaming_staging: memcpy always).");
ABSL_FLAG(bool, spin_wait, attn::server::ServerOptions{}.spin_wait,
          "CUDA backend: each stream's worker polls for its launch's end, a CPU core busy "
          "while the launch runs, and answers ~85 us sooner than when it sleeps in a "
          "blocking-sync wait (--nospin_wait: sleep, no core busy).");
ABSL_FLAG(int64_t, staging_chunk_bytes, attn::server::ServerOptions{}.staging_chunk_bytes,
          "CUDA backend: > 0 copies request tensors to the GPU a chunk of at most this many "
          "bytes at a time, through a ring of four pinned slots that stays in the CPU's cache "
          "(each chunk's copy overlaps the previous chunk's DMA); 0 stages a request's tensors "
          "whole, then copies them.");
ABSL_FLAG(bool, transport_only_fresh_outputs,
          attn::server::ServerOptions{}.transport_only_fresh_outputs,
          "--backend=transport_only: write each response's NaN output into memory of its own, "
          "as a real backend's output is (--notransport_only_fresh_outputs: lend every response "
          "one shared buffer, which stays in the CPU's caches).");
ABSL_FLAG(int64_t, pinned_heap_bytes, attn::server::ServerOptions{}.pinned_heap_bytes,
          "Arena of the pinned heap, this server's allocator for blocks of 64 KiB and more "
          "(gRPC's receive buffers among them): the CUDA backend page-locks it, so request "
          "tensors go to the GPU from where they arrived, without a staging copy. -1 = the "
          "admitted-bytes budget (--max_admitted_bytes), at most a quarter of the host's "
          "memory, on the cuda and transport_only backends, off on cpu; 0 = off; at most half "
          "the host's memory. Host memory: page-locked on the CUDA backend.");
ABSL_FLAG(int, completion_threads, attn::server::ServerOptions{}.completion_threads,
          "Threads that build finished requests' responses and hand them to gRPC: 0 = one per "
          "worker (each worker's responses in order), N = a pool of N shared by the workers.");
ABSL_FLAG(int, cpu_threads, 0,
          "CPU backend: threads of each worker's pool (made at start-up), which run one request's "
          "tiles; 0 = the cores this process may use (its CPU affinity).");
ABSL_FLAG(int, cpu_workers, 1, "CPU backend: requests run at the same time.");
ABSL_FLAG(int64_t, batch_delay_us, 0,
          "Request batching: a worker holding a request waits up to this many microseconds "
          "after its arrival for compatible ones (same dtype, kernel, shape but batch, mask, "
          "scale, return_lse; dense, inline tensors) and runs them as one launch stacked "
          "along batch. 0 = off: every request runs alone.");
ABSL_FLAG(int, max_batch_size, 16,
          "Request batching: most requests in one launch (with --batch_delay_us > 0).");
ABSL_FLAG(int64_t, stream_chunk_bytes, int64_t{1} << 20,
          "AttendStream: output bytes per response chunk.");
ABSL_FLAG(double, drain_delay_s, 0.0,
          "On SIGTERM/SIGINT: seconds to keep serving with health NOT_SERVING before new "
          "calls are refused (lets load balancers notice).");
ABSL_FLAG(double, drain_timeout_s, 30.0,
          "On SIGTERM/SIGINT: seconds that calls in flight get to finish before they are "
          "cancelled.");
ABSL_FLAG(double, max_connection_age_s, 0.0,
          "Close each client connection after this many seconds (0 = never; calls in flight "
          "get --drain_timeout_s to finish), so clients balancing over a headless Service "
          "re-resolve DNS and reach pods added since they connected.");
ABSL_FLAG(LogLevel, log_level, LogLevel::kInfo,
          "debug|info|warning|error: the least severe messages written to stderr.");
ABSL_FLAG(LogLevel, request_log_level, LogLevel::kInfo,
          "debug|info|warning|error: level of the one line per Attend/AttendStream call "
          "(id, shape, dtype, kernel, timings, status); below --log_level they are dropped. "
          "Server-side failures (INTERNAL) are always logged at error.");
ABSL_FLAG(int, http2_max_frame_bytes, attn::Http2Tuning{}.max_frame_bytes,
          "HTTP/2 SETTINGS_MAX_FRAME_SIZE this server advertises (16384..16777215; 0 = gRPC's "
          "default, 16 KiB). Larger frames cut per-frame work on tensor-sized messages.");
ABSL_FLAG(int, http2_stream_window_bytes, attn::Http2Tuning{}.stream_window_bytes,
          "Initial HTTP/2 stream receive window (0 = gRPC's default, 64 KiB); BDP probing grows "
          "it further.");
ABSL_FLAG(int, http2_write_buffer_bytes, attn::Http2Tuning{}.write_buffer_bytes,
          "Bytes gRPC buffers for writing on one connection (0 = gRPC's default).");
ABSL_FLAG(int, tcp_read_chunk_bytes, attn::Http2Tuning{}.read_chunk_bytes,
          "First socket read size (0 = gRPC's default, 8 KiB); reads adapt up to "
          "--tcp_max_read_chunk_bytes.");
ABSL_FLAG(int, tcp_max_read_chunk_bytes, attn::Http2Tuning{}.max_read_chunk_bytes,
          "Largest socket read (0 = gRPC's default, 4 MiB).");
ABSL_FLAG(bool, reflection, true,
          "Serve gRPC server reflection (for grpcurl and grpc_cli); with --token_file it needs "
          "a token too.");
ABSL_FLAG(std::string, tls_cert, "",
          "PEM certificate chain: serve TLS (with --tls_key). Needed beyond loopback unless "
          "--insecure.");
ABSL_FLAG(std::string, tls_key, "", "PEM private key of --tls_cert.");
ABSL_FLAG(std::string, tls_client_ca, "",
          "PEM roots of client certificates: require and verify one from every client "
          "(mutual TLS; needs --tls_cert).");
ABSL_FLAG(std::string, token_file, "",
          "File of accepted bearer tokens, one per line ('#' comments): every call but "
          "grpc.health.v1 must carry 'authorization: Bearer <token>', else UNAUTHENTICATED. "
          "Beyond loopback it needs TLS.");
ABSL_FLAG(bool, insecure, false,
          "Allow --listen beyond loopback without TLS or tokens: anyone who can connect may "
          "call (a warning is logged).");
ABSL_FLAG(int, metrics_port, 0,
          "Serve Prometheus metrics (server/METRICS.md) over HTTP at GET /metrics on this port; "
          "0 = off.");
ABSL_FLAG(std::string, metrics_address, "",
          "IPv4 address (or localhost) the metrics port listens on, e.g. 127.0.0.1 or "
          "0.0.0.0; empty = the host of --listen.");
ABSL_FLAG(std::string, test_inject_worker_faults, "",
          "TEST ONLY, never in production: make workers fail like a GPU with a sticky error. "
          "Comma-separated WORKER:GOOD_JOBS pairs, e.g. \"1:0\": worker WORKER (numbered as "
          "attn_worker_healthy's worker label) runs GOOD_JOBS jobs, then answers the next with "
          "INTERNAL and retires. Empty = off.");

namespace {

bool ParseDevices(const std::string& text, std::vector<int>* devices, std::string* error) {
  devices->clear();
  if (text.empty()) return true;
  for (absl::string_view part : absl::StrSplit(text, ',')) {
    int ordinal = 0;
    if (!absl::SimpleAtoi(absl::StripAsciiWhitespace(part), &ordinal) || ordinal < 0) {
      *error = "--devices: '" + std::string(part) + "' is not a device ordinal (e.g. \"0,1\")";
      return false;
    }
    devices->push_back(ordinal);
  }
  return true;
}

// Flags to options; false (with `error`) for values no server can run with.
bool OptionsFromFlags(attn::server::ServerOptions* options, std::string* error) {
  options->listen = absl::GetFlag(FLAGS_listen);
  options->listen_unix = absl::GetFlag(FLAGS_listen_unix);
  options->allow_shared_memory = absl::GetFlag(FLAGS_allow_shared_memory);
  options->max_regions_per_lease = absl::GetFlag(FLAGS_max_regions_per_lease);
  options->kv_cache_bytes = absl::GetFlag(FLAGS_kv_cache_bytes);
  options->kv_page_bytes = absl::GetFlag(FLAGS_kv_page_bytes);
  options->kv_cache_memory_fraction = absl::GetFlag(FLAGS_kv_cache_memory_fraction);
  options->session_idle_timeout_s = absl::GetFlag(FLAGS_session_idle_timeout_s);
  options->max_session_tokens = absl::GetFlag(FLAGS_max_session_tokens);
  options->max_steps_per_call = absl::GetFlag(FLAGS_max_steps_per_call);
  options->max_sessions_per_lease = absl::GetFlag(FLAGS_max_sessions_per_lease);
  options->port_file = absl::GetFlag(FLAGS_port_file);
  options->backend = absl::GetFlag(FLAGS_backend);
  if (!ParseDevices(absl::GetFlag(FLAGS_devices), &options->devices, error)) return false;
  options->streams_per_device = absl::GetFlag(FLAGS_streams_per_device);
  options->copy_threads = absl::GetFlag(FLAGS_copy_threads);
  options->streaming_staging = absl::GetFlag(FLAGS_streaming_staging);
  options->spin_wait = absl::GetFlag(FLAGS_spin_wait);
  options->staging_chunk_bytes = absl::GetFlag(FLAGS_staging_chunk_bytes);
  options->transport_only_fresh_outputs = absl::GetFlag(FLAGS_transport_only_fresh_outputs);
  options->pinned_heap_bytes = absl::GetFlag(FLAGS_pinned_heap_bytes);
  options->completion_threads = absl::GetFlag(FLAGS_completion_threads);
  options->cpu_threads = absl::GetFlag(FLAGS_cpu_threads);
  options->cpu_workers = absl::GetFlag(FLAGS_cpu_workers);
  const int64_t batch_delay_us = absl::GetFlag(FLAGS_batch_delay_us);
  options->batch_delay = absl::Microseconds(batch_delay_us);
  options->max_batch_size = absl::GetFlag(FLAGS_max_batch_size);
  options->limits.max_message_bytes = absl::GetFlag(FLAGS_max_message_bytes);
  options->limits.max_tokens_per_request = absl::GetFlag(FLAGS_max_tokens_per_request);
  options->limits.queue_capacity = absl::GetFlag(FLAGS_queue_capacity);
  options->limits.max_stream_buffer_bytes = absl::GetFlag(FLAGS_max_stream_buffer_bytes);
  options->limits.max_admitted_bytes = absl::GetFlag(FLAGS_max_admitted_bytes);
  options->limits.max_peer_share = absl::GetFlag(FLAGS_max_peer_share);
  options->stream_idle_timeout = absl::Seconds(absl::GetFlag(FLAGS_stream_idle_timeout_s));
  options->stream_upload_timeout = absl::Seconds(absl::GetFlag(FLAGS_stream_upload_timeout_s));
  options->drain_upload_idle = absl::Seconds(absl::GetFlag(FLAGS_drain_upload_idle_s));
  options->max_concurrent_streams = absl::GetFlag(FLAGS_max_concurrent_streams);
  options->max_connections = absl::GetFlag(FLAGS_max_connections);
  options->stream_chunk_bytes = absl::GetFlag(FLAGS_stream_chunk_bytes);
  options->drain_delay = absl::Seconds(absl::GetFlag(FLAGS_drain_delay_s));
  options->drain_timeout = absl::Seconds(absl::GetFlag(FLAGS_drain_timeout_s));
  options->max_connection_age = absl::Seconds(absl::GetFlag(FLAGS_max_connection_age_s));
  options->reflection = absl::GetFlag(FLAGS_reflection);
  options->http2.max_frame_bytes = absl::GetFlag(FLAGS_http2_max_frame_bytes);
  options->http2.stream_window_bytes = absl::GetFlag(FLAGS_http2_stream_window_bytes);
  options->http2.write_buffer_bytes = absl::GetFlag(FLAGS_http2_write_buffer_bytes);
  options->http2.read_chunk_bytes = absl::GetFlag(FLAGS_tcp_read_chunk_bytes);
  options->http2.max_read_chunk_bytes = absl::GetFlag(FLAGS_tcp_max_read_chunk_bytes);
  options->security.tls_cert_path = absl::GetFlag(FLAGS_tls_cert);
  options->security.tls_key_path = absl::GetFlag(FLAGS_tls_key);
  options->security.tls_client_ca_path = absl::GetFlag(FLAGS_tls_client_ca);
  options->security.token_file = absl::GetFlag(FLAGS_token_file);
  options->security.insecure = absl::GetFlag(FLAGS_insecure);
  options->request_log_level = absl::GetFlag(FLAGS_request_log_level);
  options->metrics_port = absl::GetFlag(FLAGS_metrics_port);
  options->metrics_address = absl::GetFlag(FLAGS_metrics_address);
  absl::StatusOr<std::vector<attn::server::WorkerFault>> faults =
      attn::server::ParseWorkerFaults(absl::GetFlag(FLAGS_test_inject_worker_faults));
  if (!faults.ok()) {
    *error = std::string(faults.status().message());
    return false;
  }
  options->test_worker_faults = *std::move(faults);

  struct Range {
    const char* flag;
    int64_t value, min, max;
  } ranges[] = {
      {"--max_message_bytes", options->limits.max_message_bytes, 1024, 2147483647},
      {"--max_tokens_per_request", options->limits.max_tokens_per_request, 1, int64_t{1} << 36},
      {"--queue_capacity", options->limits.queue_capacity, 0, 1 << 20},
      {"--max_stream_buffer_bytes", options->limits.max_stream_buffer_bytes, 0, int64_t{1} << 44},
      {"--max_admitted_bytes", options->limits.max_admitted_bytes, 0, int64_t{1} << 44},
      {"--max_concurrent_streams", options->max_concurrent_streams, 1, 1 << 20},
      {"--max_connections", options->max_connections, 0, INT32_MAX},
      {"--streams_per_device", options->streams_per_device, 1, 16},
      {"--max_regions_per_lease", options->max_regions_per_lease, 1, 1 << 16},
      {"--kv_cache_bytes", options->kv_cache_bytes, 0, int64_t{1} << 44},
      {"--kv_page_bytes", options->kv_page_bytes, 512, int64_t{64} << 20},
      {"--max_session_tokens", options->max_session_tokens, 1, int64_t{1} << 30},
      {"--max_steps_per_call", options->max_steps_per_call, 1, 65535},
      {"--max_sessions_per_lease", options->max_sessions_per_lease, 1, 1 << 20},
      {"--cpu_threads", options->cpu_threads, 0, 1024},
      {"--copy_threads", options->copy_threads, 0, 64},
      {"--staging_chunk_bytes", options->staging_chunk_bytes, 0, int64_t{1} << 30},
      {"--pinned_heap_bytes", options->pinned_heap_bytes, -1, int64_t{1} << 44},
      {"--completion_threads", options->completion_threads, 0, 256},
      {"--cpu_workers", options->cpu_workers, 1, 1024},
      {"--batch_delay_us", batch_delay_us, 0, 10000000},
      {"--max_batch_size", options->max_batch_size, 1, 1024},
      {"--stream_chunk_bytes", options->stream_chunk_bytes, 1024, int64_t{64} << 20},
      {"--http2_max_frame_bytes", options->http2.max_frame_bytes, 0, (1 << 24) - 1},
      {"--http2_stream_window_bytes", options->http2.stream_window_bytes, 0, 1 << 30},
      {"--http2_write_buffer_bytes", options->http2.write_buffer_bytes, 0, 1 << 30},
      {"--tcp_read_chunk_bytes", options->http2.read_chunk_bytes, 0, 1 << 30},
      {"--tcp_max_read_chunk_bytes", options->http2.max_read_chunk_bytes, 0, 1 << 30},
      {"--metrics_port", options->metrics_port, 0, 65535},
  };
  for (const Range& r : ranges) {
    if (r.value < r.min || r.value > r.max) {
      *error = std::string(r.flag) + " is " + std::to_string(r.value) + "; it must be between " +
               std::to_string(r.min) + " and " + std::to_string(r.max);
      return false;
    }
  }
  if (options->kv_page_bytes % 256 != 0) {
    *error = "--kv_page_bytes is " + std::to_string(options->kv_page_bytes) +
             "; it must be a multiple of 256 (pages and their halves start 16-byte aligned)";
    return false;
  }
  if (!(options->kv_cache_memory_fraction >= 0.0 && options->kv_cache_memory_fraction <= 0.95)) {
    *error = "--kv_cache_memory_fraction is " +
             std::to_string(options->kv_cache_memory_fraction) +
             "; it must be between 0 (use --kv_cache_bytes) and 0.95";
    return false;
  }
  if (!(options->session_idle_timeout_s >= 0.0)) {
    *error = "--session_idle_timeout_s must be >= 0 (0: sessions never expire)";
    return false;
  }
  if (!(options->limits.max_peer_share > 0.0 && options->limits.max_peer_share <= 1.0)) {
    *error = "--max_peer_share is " + std::to_string(options->limits.max_peer_share) +
             "; it must be above 0 and at most 1";
    return false;
  }
  if (options->stream_idle_timeout <= absl::ZeroDuration() ||
      options->stream_upload_timeout <= absl::ZeroDuration() ||
      options->drain_upload_idle < absl::ZeroDuration()) {
    *error = "--stream_idle_timeout_s and --stream_upload_timeout_s must be > 0, "
             "--drain_upload_idle_s >= 0";
    return false;
  }
  if (options->drain_delay < absl::ZeroDuration() ||
      options->drain_timeout < absl::ZeroDuration() ||
      options->max_connection_age < absl::ZeroDuration()) {
    *error = "--drain_delay_s, --drain_timeout_s and --max_connection_age_s must be >= 0";
    return false;
  }
  // A flag combination no server starts with is a usage error (exit 2);
  // AttentionServer::Create checks it again for embedders and logs the warning.
  std::string warning;
  if (absl::Status exposure = attn::server::CheckExposure(options->listen, options->security,
                                                          &warning);
      !exposure.ok()) {
    *error = std::string(exposure.message());
    return false;
  }
  return true;
}

}  // namespace

int main(int argc, char** argv) {
  const std::vector<char*> args = attn::ParseCommandLine(
      argc, argv,
      {"attn_server",
       "attnserve gRPC server: FlashAttention-2 forward as a service "
       "(attnserve.v1.Attention, grpc.health.v1, reflection).\n\n"
       "usage: attn_server [--listen=HOST:PORT] [--backend=auto|cuda|cpu] [flags]\n\n"
       "examples:\n"
       "  attn_server --listen=0.0.0.0:50051 --tls_cert=server.crt --tls_key=server.key "
       "--token_file=tokens\n"
       "  attn_server --backend=cpu --cpu_threads=8\n\n"
       "SIGTERM/SIGINT: health NOT_SERVING, drain, exit 0. Exit status 2: bad flags.",
       {"server/main.cc"}});
  if (args.size() > 1) {
    std::fprintf(stderr, "attn_server: unexpected argument '%s' (see --help)\n", args[1]);
    return attn::kExitUsage;
  }
  attn::server::SetLogLevel(absl::GetFlag(FLAGS_log_level));
#ifdef ATTN_HAVE_PINNED_HEAP
  // This binary's malloc (server/CMakeLists.txt); armed with the backend.
  attn::server::ProvidePinnedHeap({attn_pinned_heap_arm, attn_pinned_heap_arena, attn_pinned_heap_used_bytes,
                                   attn_pinned_heap_overflows});
#endif

  // Block the shutdown signals before any thread starts, so every thread
  // inherits the mask and only sigwait() below ever sees them.
  sigset_t signals;
  sigemptyset(&signals);
  sigaddset(&signals, SIGTERM);
  sigaddset(&signals, SIGINT);
  pthread_sigmask(SIG_BLOCK, &signals, nullptr);

  attn::server::ServerOptions options;
  std::string error;
  if (!OptionsFromFlags(&options, &error)) {
    LOGF(kError, "%s", error);
    return attn::kExitUsage;
  }

  auto server = attn::server::AttentionServer::Create(options);
  if (!server.ok()) {
    LOGF(kError, "cannot start: %s", server.status().ToString());
    return 1;
  }
  if (absl::Status started = (*server)->Start(); !started.ok()) {
    LOGF(kError, "cannot start: %s", started.ToString());
    (*server)->Shutdown();
    return 1;
  }
  LOGF(kInfo, "%s", (*server)->Describe());

  int signal_number = 0;
  sigwait(&signals, &signal_number);
  LOGF(kInfo, "received %s: draining", signal_number == SIGTERM ? "SIGTERM" : "SIGINT");
  // A second signal while draining means "now".
  std::thread([signals]() {
    int again = 0;
    sigwait(&signals, &again);
    attn::server::Log(LogLevel::kWarning, "second shutdown signal: exiting without draining");
    _exit(1);
  }).detach();

  (*server)->Shutdown();
  server->reset();
  LOGF(kInfo, "stopped");
  return 0;
}
