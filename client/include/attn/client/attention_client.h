// attn/client/attention_client.h
//
// AttentionClient: the C++ client of attnserve's attnserve.v1.Attention
// service (and of the standard grpc.health.v1 health service).
//
// One client owns its gRPC channels (options.connections TCP connections,
// Attend calls spread over them round robin); it is thread-safe, and meant
// to be created once and shared. Attend runs remote attention on host tensors and
// returns the output with the server's timing breakdown and this client's
// own (AttendResult). Requests larger than the stream threshold
// (ClientOptions::stream_threshold_bytes) travel over the chunked
// AttendStream RPC automatically, so tensors beyond one message's limit work
// the same way as small ones.
//
// Errors are absl::Status values with gRPC's code numbers (the two enums
// agree): the server's codes pass through (INVALID_ARGUMENT for a bad shape,
// RESOURCE_EXHAUSTED when its queue is full, ...), with the address and the
// RPC prefixed to the message. Client-side problems get their own codes:
// INVALID_ARGUMENT for inputs that do not match their shape, UNAVAILABLE when
// the server cannot be reached, DEADLINE_EXCEEDED when a call's timeout ran
// out.
//
// Example:
//
//   attn::ClientOptions options;
//   options.address = "gpu-node:50051";
//   absl::StatusOr<std::unique_ptr<attn::AttentionClient>> client =
//       attn::AttentionClient::Connect(options);
//   if (!client.ok()) return client.status();
//   attn::AttentionInputs in = attn::MakeRandomInputs(
//       attn::Shape{1, 4096, 16, 128}, attn::DType::kBFloat16, /*seed=*/1);
//   absl::StatusOr<attn::AttendResult> result = (*client)->Attend(in);
//   if (!result.ok()) return result.status();
//   // result->out holds O; result->server.kernel_ns the kernel's time.
#ifndef ATTN_CLIENT_ATTENTION_CLIENT_H_
#define ATTN_CLIENT_ATTENTION_CLIENT_H_

#include <atomic>
#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/functional/any_invocable.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "attn/client/attend_types.h"
#include "attn/client/client_options.h"
#include "attnserve/v1/attention.grpc.pb.h"
#include "grpcpp/channel.h"
#include "grpcpp/generic/generic_stub.h"

namespace attn {
namespace internal {
class Lease;
enum class LeaseKind;
}  // namespace internal

// grpc.health.v1 serving status of a service.
enum class HealthStatus : int {
  kUnknown = 0,
  kServing = 1,
  kNotServing = 2,
  kServiceUnknown = 3,
};

// "SERVING", "NOT_SERVING", ...: the proto enum's names.
const char* HealthStatusName(HealthStatus status);

// Receives the outcome of AttendAsync. Runs on a gRPC callback thread: it
// must not block for long (that stalls other calls' completions), but it may
// start new calls on the same client.
using AttendCallback = absl::AnyInvocable<void(absl::StatusOr<AttendResult>) &&>;

class AttentionClient {
 public:
  // Opens a channel to `options.address`, waits up to
  // options.connect_timeout for it to become ready, and (unless
  // options.fetch_server_info is false) fetches the server's info. Returns
  // UNAVAILABLE naming the address when the server cannot be reached in
  // time, INVALID_ARGUMENT for unusable options (e.g. unreadable TLS files).
  static absl::StatusOr<std::unique_ptr<AttentionClient>> Connect(
      const ClientOptions& options);

  // Waits for the callbacks of all AttendAsync calls still in flight (so it
  // must not run inside one of those callbacks).
  ~AttentionClient();

  AttentionClient(const AttentionClient&) = delete;
  AttentionClient& operator=(const AttentionClient&) = delete;

  // Runs attention on the server and waits for the result. `inputs` is read
  // in place (not copied) while the call runs.
  absl::StatusOr<AttendResult> Attend(const AttentionInputs& inputs,
                                      const AttendOptions& options = {});

  // Starts the same call and returns at once; `done` runs exactly once, on a
  // gRPC thread, when the call finishes. The client keeps `inputs` alive
  // until then, so one set of inputs can feed many concurrent calls.
  // Invalid inputs are reported through `done` as well.
  void AttendAsync(std::shared_ptr<const AttentionInputs> inputs,
                   const AttendOptions& options, AttendCallback done);

  // The kernels the server can run, in ladder order.
  absl::StatusOr<attnserve::v1::ListKernelsResponse> ListKernels();
  // Backend, devices, limits and version of the server.
  absl::StatusOr<attnserve::v1::ServerInfo> GetServerInfo();
  // The server's cumulative counters; take deltas between two calls.
  absl::StatusOr<attnserve::v1::ServerStats> GetStats();
  // Same-host shared memory (the server runs with --allow_shared_memory and
  // this client reaches it over a unix socket or loopback). Regions belong
  // to this client's lease, opened by the first registration (a HoldRegions
  // call on the first connection) and ended by the destructor, which makes
  // the server unregister them all; they also end if that connection drops
  // (later references get NOT_FOUND). Tensors in regions are named by
  // TensorRef (AttentionInputs::q_ref, AttendOptions::out_ref, ...).
  //
  // A system region: bytes [offset, offset + byte_size) of the POSIX
  // shared-memory object `shm_name` (SharedMemory creates one); offset a
  // multiple of the page size.
  absl::StatusOr<attnserve::v1::RegionInfo> RegisterSystemRegion(const std::string& name,
                                                                 const std::string& shm_name,
                                                                 int64_t offset,
                                                                 int64_t byte_size);
  // A CUDA region: bytes [offset, offset + byte_size) of the device
  // allocation exported by cudaIpcGetMemHandle (`ipc_handle`, its 64 bytes)
  // on CUDA device `device`, which the server's kernel reads and writes in
  // place (a CUDA server on the same GPU).
  absl::StatusOr<attnserve::v1::RegionInfo> RegisterCudaRegion(const std::string& name,
                                                               const std::string& ipc_handle,
                                                               int device, int64_t offset,
                                                               int64_t byte_size);
  // Waits until no request uses the region (at most ClientOptions::rpc_timeout).
  absl::Status UnregisterRegion(const std::string& name);
  absl::StatusOr<std::vector<attnserve::v1::RegionInfo>> ListRegions();

  // KV-cache sessions (the server runs with --kv_cache_bytes > 0): one
  // sequence's K/V cache across a model's layers, kept by the server, so a
  // step sends only its new tokens. Sessions belong to this client's session
  // lease, opened by the first session call (a HoldSessions call on the
  // first connection, which every session call then uses: the server lets
  // only the lease's holder name its sessions) and ended by the destructor,
  // which makes the server close them all; they also end if that connection
  // drops (later calls get NOT_FOUND: re-prefill).
  absl::StatusOr<attnserve::v1::SessionInfo> OpenSession(
      const attnserve::v1::SessionConfig& config);
  // One layer's step for the sessions request.steps names (lease_id is set
  // here): appends each step's k/v to its session's cache and attends
  // causally over the whole cache. Calls on one session are the caller's to
  // order (a session in a call refuses others: FAILED_PRECONDITION).
  // timeout: zero = ClientOptions::rpc_timeout.
  absl::StatusOr<attnserve::v1::AttendSessionsResponse> AttendSessions(
      attnserve::v1::AttendSessionsRequest request, absl::Duration timeout = absl::ZeroDuration());
  // Drops the last `tokens` tokens of every layer (rejected speculative tokens).
  absl::StatusOr<attnserve::v1::SessionInfo> TruncateSession(const std::string& session_id,
                                                             int64_t tokens);
  // A new session sharing the parent's cached tokens (pages copy-on-write).
  absl::StatusOr<attnserve::v1::SessionInfo> ForkSession(const std::string& session_id);
  absl::Status CloseSession(const std::string& session_id);
  absl::StatusOr<std::vector<attnserve::v1::SessionInfo>> ListSessions();

  // grpc.health.v1 Check of `service` ("" = the server as a whole). A status
  // other than OK means the check itself failed (unreachable server,
  // timeout); NOT_SERVING is a successful answer.
  absl::StatusOr<HealthStatus> CheckHealth(const std::string& service = "");

  // Info fetched by Connect; nullopt when options.fetch_server_info was false.
  const std::optional<attnserve::v1::ServerInfo>& server_info() const { return server_info_; }
  // Requests whose encoded size exceeds this many bytes are streamed.
  int64_t stream_threshold_bytes() const { return stream_threshold_bytes_; }
  const ClientOptions& options() const { return options_; }
  // The first connection's channel (the one every RPC but Attend uses).
  const std::shared_ptr<grpc::Channel>& channel() const { return connections_.front()->channel; }
  int connection_count() const { return static_cast<int>(connections_.size()); }
  // The channel of connection `i` (0 <= i < connection_count()).
  const std::shared_ptr<grpc::Channel>& connection_channel(int i) const {
    return connections_.at(static_cast<size_t>(i))->channel;
  }

  // True when Attend would stream `inputs` under Transport::kAuto.
  bool WouldStream(const AttentionInputs& inputs) const;

  // OK when a call on `geometry` (its tensors need not be filled in yet) is
  // within the limits the server announced at Connect (ServerInfo
  // limits.max_tokens_per_request); else RESOURCE_EXHAUSTED naming the
  // tensor and the limit, as the server would answer. So a caller can learn
  // before building gigabytes of inputs what the server would refuse. OK
  // when the server info was not fetched. Attend and AttendAsync check it
  // before sending anything.
  absl::Status CheckServerLimits(const AttentionInputs& geometry) const;

 private:
  // One TCP connection (a channel with its own subchannel pool) and its stubs.
  struct Connection {
    explicit Connection(std::shared_ptr<grpc::Channel> c);
    std::shared_ptr<grpc::Channel> channel;
    std::unique_ptr<attnserve::v1::Attention::Stub> stub;
    grpc::GenericStub generic_stub;
  };

  AttentionClient(const ClientOptions& options,
                  std::vector<std::unique_ptr<Connection>> connections);
  // The connection for the next Attend call.
  Connection& NextConnection();
  // The connection at round-robin position `n` if it is READY, else the
  // next READY one after it, else the one at `n`; those not READY are asked
  // to connect. So a call never waits on a connection's first attempt while
  // another is ready. Why: gRPC 1.51 (Debian 12) can fail a connection
  // attempt that did not fail (connect(2)'s errno is overwritten before it is
  // read; fixed upstream in grpc/grpc#35064), and the call waiting on it then
  // fails UNAVAILABLE "failed to connect to all addresses": 7 times in 1193
  // runs of client_c_api_test's eight concurrent calls on a loaded host.
  Connection& ReadyConnectionFrom(uint64_t n);

  // Deadline and metadata of a call.
  void PrepareContext(grpc::ClientContext* context, absl::Duration timeout) const;
  void PrepareContext(grpc::ClientContext* context,
                      std::chrono::system_clock::time_point deadline) const;
  // Prefixes "<rpc> to <address>: " to a failed call's message.
  absl::Status CallError(const grpc::Status& status, const char* rpc) const;

  void StartUnary(std::shared_ptr<const AttentionInputs> inputs, const AttendOptions& options,
                  AttendCallback done);
  void StartStream(std::shared_ptr<const AttentionInputs> inputs, const AttendOptions& options,
                   AttendCallback done);
  // The call as `shards` unary calls on as many distinct connections
  // (call_split.h), whose calls ReserveCalls counted.
  void StartSplit(std::shared_ptr<const AttentionInputs> inputs, const AttendOptions& options,
                  int shards, AttendCallback done);
  // Shards a unary call of `inputs` could use: 1 unless it is splittable,
  // above options_.split_calls_above_bytes and the server has more than one
  // worker; at most the connections.
  int WantedShards(const AttentionInputs& inputs, const AttendOptions& options) const;
  // Counts a unary call as in flight: as min(wanted, idle connections)
  // calls when that is at least 2 (then returned: the call splits), else as
  // one (1 returned).
  int ReserveCalls(int wanted);

  // Calls in flight: started, and their callback not yet returned (the
  // destructor waits for none) ...
  void CallStarted();
  void CallFinished();
  // ... and those of them whose result is not yet being delivered, called
  // just before the callback runs: the calls that keep a connection busy,
  // as ReserveCalls counts them (so a caller's next call, made once the
  // last one returned, sees its connection idle).
  void CallAnswered();
  // The open lease of `kind`, opened now if there is none (or the last one ended).
  absl::StatusOr<std::string> LeaseId(internal::LeaseKind kind);
  absl::StatusOr<attnserve::v1::RegionInfo> Register(attnserve::v1::RegisterRegionRequest request);
  // A unary session call on the session lease's connection, lease_id set.
  template <typename Request, typename Response>
  using SessionMethod = grpc::Status (attnserve::v1::Attention::Stub::*)(grpc::ClientContext*,
                                                                         const Request&, Response*);
  template <typename Request, typename Response>
  absl::StatusOr<Response> SessionCall(const char* rpc, SessionMethod<Request, Response> method,
                                       Request request, absl::Duration timeout);

  const ClientOptions options_;
  const std::vector<std::unique_ptr<Connection>> connections_;  // never empty
  std::atomic<uint64_t> next_connection_{0};
  std::optional<attnserve::v1::ServerInfo> server_info_;
  int64_t stream_threshold_bytes_ = 0;

  absl::Mutex mu_;
  int64_t calls_in_flight_ ABSL_GUARDED_BY(mu_) = 0;
  int64_t calls_unanswered_ ABSL_GUARDED_BY(mu_) = 0;
  absl::Mutex lease_mu_;
  std::unique_ptr<internal::Lease> region_lease_ ABSL_GUARDED_BY(lease_mu_);
  std::unique_ptr<internal::Lease> session_lease_ ABSL_GUARDED_BY(lease_mu_);
};

}  // namespace attn

#endif  // ATTN_CLIENT_ATTENTION_CLIENT_H_
