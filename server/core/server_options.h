// server/server_options.h
//
// Plain option structs for attn_server, with their defaults. main.cc fills
// them from flags; nothing below main reads flags, so tests build servers
// and schedulers from these structs directly.
#ifndef ATTN_SERVER_SERVER_OPTIONS_H_
#define ATTN_SERVER_SERVER_OPTIONS_H_

#include <algorithm>
#include <cstdint>
#include <string>
#include <vector>

#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "attn/dtype.h"
#include "attn/http2_tuning.h"
#include "core/worker_fault_spec.h"
#include "core/log.h"

namespace attn::server {

// Which executors run the attention calls.
enum class BackendChoice : int {
  kAuto = 0,  // CUDA when the build has it and a usable GPU is visible, else CPU
  kCuda = 1,  // CUDA or fail to start
  kCpu = 2,   // the multi-threaded CPU reference kernel
  // Measurement only, never chosen by auto: requests are decoded and checked
  // as on the real backend, but nothing is computed; outputs are NaN and
  // responses name this backend. Measures what the transport alone allows.
  kTransportOnly = 3,
};

// "auto", "cuda", "cpu", "transport_only"
absl::string_view BackendChoiceName(BackendChoice choice);
bool AbslParseFlag(absl::string_view text, BackendChoice* choice, std::string* error);
std::string AbslUnparseFlag(BackendChoice choice);

// Sizes and counts that bound what one request and the whole server may use.
struct Limits {
  // Largest gRPC message in either direction (unary requests carry Q, K and
  // V in one message). gRPC caps this below 2 GiB.
  int64_t max_message_bytes = int64_t{256} << 20;
  // Largest tensor, in elements: each of Q and O (batch*seq_len*num_heads*
  // head_dim) and each of K and V (batch*kv_seq_len*kv_num_heads*head_dim)
  // on its own; with varlen the packed totals replace batch*seq_len, and each
  // sequence counts as at least one token. Sizes the CUDA executors'
  // preallocated buffers. The default fits B=4, S=4096, H=16, D=128 (64 MiB
  // per 16-bit tensor).
  int64_t max_tokens_per_request = int64_t{1} << 25;
  // Requests waiting for a worker beyond which new ones get RESOURCE_EXHAUSTED.
  // Each waiting request holds its tensors in memory (up to 3 x 64 MiB at
  // the default token limit): size it to the host's memory.
  int queue_capacity = 64;
  // Bytes that AttendStream calls may hold (q, k, v as they arrive, and the
  // output), over all such calls together. 0: four calls of the largest size.
  int64_t max_stream_buffer_bytes = 0;
  // Bytes that all admitted calls, unary and streamed, may hold at once (the
  // inputs and outputs of each, from admission until the response is sent);
  // beyond it RESOURCE_EXHAUSTED. 0: eight calls of the largest size.
  int64_t max_admitted_bytes = 0;
  // The most of either budget one caller (a connection, or a token's
  // identity with tokens on) may hold over several calls at once, in (0, 1];
  // a caller's first call is admitted whenever it fits
  // (scheduling/admission.h).
  double max_peer_share = 0.5;

  // Bytes of one tensor of the largest allowed size, in the widest dtype.
  int64_t MaxTensorBytes() const {
    return max_tokens_per_request * static_cast<int64_t>(std::max(
                                        DTypeSize(DType::kFloat16), DTypeSize(DType::kBFloat16)));
  }
  int64_t StreamBufferBudget() const {
    // Default: four calls of the largest size, each holding q, k, v and out.
    return max_stream_buffer_bytes > 0 ? max_stream_buffer_bytes : 4 * 4 * MaxTensorBytes();
  }
  int64_t AdmittedBudget() const {
    return max_admitted_bytes > 0 ? max_admitted_bytes : 8 * 4 * MaxTensorBytes();
  }
};

// Who may call the server (server/security/). Paths are read at Create.
struct SecurityOptions {
  // PEM certificate chain and private key: serve TLS. Both or neither.
  std::string tls_cert_path;
  std::string tls_key_path;
  // PEM roots that sign client certificates: require and verify one from
  // every client (mutual TLS). Needs TLS.
  std::string tls_client_ca_path;
  // File of accepted bearer tokens (attn/token_file.h): every call but
  // grpc.health.v1 must carry `authorization: Bearer <token>`.
  std::string token_file;
  // Allow listening beyond loopback with neither TLS nor tokens.
  bool insecure = false;

  bool tls() const { return !tls_cert_path.empty() || !tls_key_path.empty(); }
  bool tokens() const { return !token_file.empty(); }
};

struct ServerOptions {
  // HOST:PORT to listen on; port 0 picks a free port (see port_file).
  std::string listen = "127.0.0.1:50051";
  // Also listen on this unix-domain socket path (same-host clients: no TCP
  // stack, and where shared-memory regions are meant to be used); empty:
  // none. Security as for `listen` on a unix socket (tokens need no TLS).
  std::string listen_unix;
  // When set, the bound port number and a newline are written here (through
  // a temporary file and rename, so readers never see half a number) once
  // the server reports SERVING.
  std::string port_file;

  BackendChoice backend = BackendChoice::kAuto;
  // CUDA ordinals to use; empty means every usable device.
  std::vector<int> devices;
  // CUDA streams per device, each with its own worker and buffers, so one
  // request's copies overlap another's kernel.
  int streams_per_device = 2;
  // CUDA backend: helper threads that copy request tensors into pinned
  // staging, shared by all streams (0: each worker copies alone). Two beat
  // four on the H200 host at S=4096, concurrency 32 (202 against 184
  // requests/s, three runs each; bench/RESULTS.md): the copies share the
  // cores with gRPC's transport, and one fewer pair of copying threads
  // leaves it more.
  int copy_threads = 2;
  // CUDA backend: copy large requests' tensors (16 MiB and more) into
  // pinned staging with streaming (non-temporal) stores, which skip the read
  // of each destination line and leave the caches to the transport
  // (backends/streaming_copy.h). At S=4096 on the H200 host: 171-175
  // requests/s at concurrency 32 against 130-158 with memcpy
  // (bench/RESULTS.md, 2026-12-02 third run).
  bool streaming_staging = true;
  // CUDA backend: a worker waits for its launch (copies in, kernel, copies
  // back) by polling its last event, a core busy meanwhile, instead of
  // sleeping in a blocking-sync wait: on an H100 host the sleeping wait
  // returned a median 94 us (p99 427 us) after the GPU finished, polling
  // 9 us (p99 20 us) (bench/RESULTS.md, 2026-12-06 fifteenth run), a
  // twelfth of a 64-session decode step's kernel time.
  bool spin_wait = true;
  // CUDA backend: > 0 sends inline inputs to the device a chunk of at most
  // this many bytes at a time, through a ring of four pinned slots that
  // stays in the CPU's last-level cache, each chunk's copy overlapping the
  // previous chunk's DMA (backends/chunked_upload.h); 0 stages a request's
  // inputs whole, then copies them.
  int64_t staging_chunk_bytes = 0;
  // transport_only backend (a measurement mode): each response's output is
  // written into memory of its own, as a real backend's is (the CUDA one's
  // D2H lands in fresh pinned ranges), so sending it reads memory, not a
  // cache-resident copy; false lends every response one shared NaN buffer,
  // which stays in the CPU's caches and so measures a transport cheaper
  // than any real response's (bench/RESULTS.md, 2026-12-02 sixth run).
  bool transport_only_fresh_outputs = true;
  // The pinned heap (pinned_heap/pinned_heap.h), attn_server's malloc: an
  // arena of this many bytes serves every allocation of 64 KiB and more,
  // gRPC's receive buffers among them; the CUDA backend page-locks it, so
  // request tensors go to the GPU from the buffers they arrived in, without
  // staging (2026-12-02 fifth run, call P: 258-299 against 219 requests/s
  // staged at S=4096, concurrency 32). -1: auto, the admitted-bytes budget,
  // at most a quarter of the host's memory, on the CUDA and transport_only
  // backends (the transport measured with the allocator the service runs
  // with), off on the CPU backend; 0: off; N: at most half the host's
  // memory (backends/pinned_heap_size.h).
  // Effective once per process, in attn_server only (not in sanitizer
  // builds, nor in processes that embed the server library without it).
  int64_t pinned_heap_bytes = -1;
  // Threads that build finished requests' responses and hand them to gRPC
  // (scheduling/completion_thread.h). 0: one per worker, each worker's
  // responses in the order it finished them. N > 0: a pool of N shared by
  // the workers. Why a pool might pay: in the 2026-12-02 runs at S=512 and
  // concurrency 32-64 (bench/RESULTS.md), a CUDA request waited 3-4 ms for
  // its worker's one completion thread, against 1 ms under
  // --backend=transport_only, whose 8 workers have 8. Measured with a pool
  // of 8 (2026-12-02 third run, call E): -7 to +14 % at S=4096 and -6 to
  // +7 % at S=512 over two rounds, no gain beyond the rounds' spread, so
  // the default stays.
  int completion_threads = 0;
  // Threads of one CPU-backend request; 0 = the host's hardware concurrency.
  int cpu_threads = 0;
  // Requests the CPU backend runs at once (each with cpu_threads threads).
  int cpu_workers = 1;
  // Request batching (scheduling/scheduler.h): compatible requests that
  // arrive within batch_delay of the first run as one launch of at most
  // max_batch_size requests. 0: off, every request runs alone.
  absl::Duration batch_delay = absl::ZeroDuration();
  int max_batch_size = 16;

  Limits limits;
  // Output bytes per AttendStream response chunk (below the 4 MiB default
  // receive limit of gRPC clients).
  int64_t stream_chunk_bytes = int64_t{1} << 20;

  // AttendStream: longest wait for the client's next message while it
  // uploads, or for it to take the next output chunk; then the call ends
  // (DEADLINE_EXCEEDED) and its buffers are released.
  absl::Duration stream_idle_timeout = absl::Seconds(30);
  // AttendStream: longest time from the call's start to its last input chunk.
  absl::Duration stream_upload_timeout = absl::Seconds(300);
  // While draining, an upload that has received nothing for this long ends
  // at once (UNAVAILABLE); 0 ends every upload still in progress.
  absl::Duration drain_upload_idle = absl::Seconds(1);
  // HTTP/2 MAX_CONCURRENT_STREAMS: calls at once on one client connection;
  // more wait in the client until one ends.
  int max_concurrent_streams = 100;
  // Client connections open at once (TCP HOST:PORT listeners); one more is
  // closed as soon as it is accepted. 0: the open-file limit less a reserve
  // (limits/fd_limit.h), so connections alone never exhaust descriptors.
  int max_connections = 0;

  // After SIGTERM/SIGINT: keep serving this long with health NOT_SERVING so
  // load balancers stop routing, then refuse new calls...
  absl::Duration drain_delay = absl::ZeroDuration();
  // ...and give calls in flight this long to finish before cancelling them.
  absl::Duration drain_timeout = absl::Seconds(30);

  // Close client connections after this long (0: never), so clients that
  // resolve a headless Service through DNS re-resolve and spread over pods
  // added since they connected. Calls in flight finish first (grace period =
  // drain_timeout).
  absl::Duration max_connection_age = absl::ZeroDuration();

  // HTTP/2 frame, window and socket-read sizes for tensor-sized messages
  // (the client applies the same defaults).
  Http2Tuning http2;

  // Register the gRPC server reflection service (grpcurl, grpc_cli). It needs
  // a token like the Attention RPCs when tokens are set.
  bool reflection = true;

  SecurityOptions security;
  // Same-host shared memory (HoldRegions in attention.proto): tensors in
  // POSIX shared-memory objects or the client's CUDA memory instead of
  // messages. Off by default; callers must be on this host.
  bool allow_shared_memory = false;
  int max_regions_per_lease = 64;
  // KV-cache sessions (HoldSessions, sessions/): the page pool's bytes (0:
  // sessions off), each page's bytes (K and V halves; a session's tokens per
  // page are the largest power of two whose rows fit half of one: 32 at
  // 8 KV heads x 128 bf16), the idle time after which a session is closed
  // (0: never), and the bounds of one session and one step call. On the
  // CUDA backend kv_cache_memory_fraction > 0 sizes the pool instead: that
  // fraction of the device memory free after the streams' buffers.
  int64_t kv_cache_bytes = int64_t{256} << 20;
  double kv_cache_memory_fraction = 0;
  int64_t kv_page_bytes = int64_t{128} << 10;
  double session_idle_timeout_s = 600;
  int64_t max_session_tokens = int64_t{1} << 20;
  int max_steps_per_call = 256;
  int max_sessions_per_lease = 4096;
  // Prometheus metrics (server/METRICS.md): GET /metrics over plain HTTP on
  // metrics_address:metrics_port; 0 = no metrics endpoint. An empty
  // metrics_address means the host of `listen`.
  int metrics_port = 0;
  std::string metrics_address;

  // Level of the one-line-per-request log (failures with INTERNAL, UNKNOWN
  // or DATA_LOSS are always logged at error).
  LogLevel request_log_level = LogLevel::kInfo;

  // TEST ONLY (--test_inject_worker_faults): workers made to fail like a GPU
  // with a sticky error (backends/fault_injecting_executor.h). Empty, and
  // so off, unless a test asks.
  std::vector<WorkerFault> test_worker_faults;
};

}  // namespace attn::server

#endif  // ATTN_SERVER_SERVER_OPTIONS_H_
