#include "attn/client/attention_client.h"

#include <algorithm>
#include <chrono>
#include <cstring>
#include <optional>
#include <string>
#include <thread>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/notification.h"
#include "absl/time/clock.h"
#include "call_split.h"
#include "channel_factory.h"
#include "grpc/grpc.h"
#include "health_codec.h"
#include "grpcpp/client_context.h"
#include "monotonic_clock.h"
#include "lease.h"
#include "server_limits.h"
#include "status_util.h"
#include "stream_call.h"
#include "wire_codec.h"

namespace attn {
namespace {

namespace pb = ::attnserve::v1;

constexpr char kAttendMethod[] = "/attnserve.v1.Attention/Attend";
constexpr char kAttendSessionsMethod[] = "/attnserve.v1.Attention/AttendSessions";
// Stream threshold when the server's limit is unknown: below gRPC-based
// servers' common 64 MiB-and-up limits, and large enough that streaming
// (which copies tensors into chunks) is rare for everyday shapes.
constexpr int64_t kFallbackStreamThreshold = int64_t{64} << 20;
// Room left under a message limit for the header fields and framing.
constexpr int64_t kMessageSlack = 4096;

const char* ChannelStateName(grpc_connectivity_state state) {
  switch (state) {
    case GRPC_CHANNEL_IDLE:
      return "IDLE";
    case GRPC_CHANNEL_CONNECTING:
      return "CONNECTING";
    case GRPC_CHANNEL_READY:
      return "READY";
    case GRPC_CHANNEL_TRANSIENT_FAILURE:
      return "TRANSIENT_FAILURE";
    case GRPC_CHANNEL_SHUTDOWN:
      return "SHUTDOWN";
  }
  return "UNKNOWN";
}

// gRPC shuts its runtime down when its last object (channel, server) is
// destroyed and starts it again for the next one. In gRPC 1.51 a channel
// created right after such a cycle can trip over connection state the
// previous cycle left behind ("ref_counted.h: assertion failed: prior > 0",
// seen when one client and server were destroyed and the next client's
// connection attempt failed). Clients therefore keep the runtime up for the
// rest of the process: the next client would start it again anyway.
void KeepGrpcRuntimeUp() {
  static const bool initialized = [] {
    grpc_init();
    return true;
  }();
  static_cast<void>(initialized);
}

std::chrono::system_clock::time_point DeadlineAfter(absl::Duration timeout) {
  return std::chrono::system_clock::now() +
         std::chrono::duration_cast<std::chrono::system_clock::duration>(
             absl::ToChronoNanoseconds(timeout));
}

// READY within options.connect_timeout, or UNAVAILABLE naming the address.
// Attempts that fail (refused, unresolvable, a TLS handshake that does not
// verify) end the wait kFailedAttemptsGrace after the first one, with
// retries in between (channel_factory.h shortens gRPC's first reconnect
// backoff): a refused connection is reported in about a second, not after
// the whole connect timeout, and one spurious failure (the gRPC 1.51
// connect(2) errno race, ReadyConnectionFrom) is retried before giving up.
absl::Status WaitForReady(grpc::Channel& channel, const ClientOptions& options) {
  constexpr absl::Duration kFailedAttemptsGrace = absl::Seconds(1);
  const absl::Time start = absl::Now();
  const absl::Time deadline = start + options.connect_timeout;
  std::optional<absl::Time> failing_since;
  grpc_connectivity_state state = channel.GetState(/*try_to_connect=*/true);
  while (state != GRPC_CHANNEL_READY) {
    const absl::Time now = absl::Now();
    if (state == GRPC_CHANNEL_TRANSIENT_FAILURE && !failing_since.has_value()) {
      failing_since = now;
    }
    const absl::Time give_up =
        failing_since.has_value() ? std::min(deadline, *failing_since + kFailedAttemptsGrace)
                                  : deadline;
    if (now >= give_up) break;
    channel.WaitForStateChange(state, absl::ToChronoTime(give_up));
    state = channel.GetState(/*try_to_connect=*/true);
  }
  if (state == GRPC_CHANNEL_READY) return absl::OkStatus();
  const std::string why =
      failing_since.has_value()
          ? absl::StrCat("every connection attempt for ",
                         absl::FormatDuration(absl::Trunc(absl::Now() - *failing_since,
                                                          absl::Milliseconds(1))),
                         " failed (refused, unreachable, or the name does not resolve",
                         options.tls.enabled ? ", or the TLS handshake failed)" : ")")
          : absl::StrCat("no connection within ", absl::FormatDuration(options.connect_timeout),
                         " (connect_timeout)");
  return absl::UnavailableError(absl::StrCat(
      "cannot connect to attnserve at '", options.address, "': ", why, " (channel state ",
      ChannelStateName(state), "): is attn_server running there",
      options.tls.enabled ? ", and does its TLS certificate verify?" : "?"));
}

}  // namespace

const char* HealthStatusName(HealthStatus status) {
  switch (status) {
    case HealthStatus::kUnknown:
      return "UNKNOWN";
    case HealthStatus::kServing:
      return "SERVING";
    case HealthStatus::kNotServing:
      return "NOT_SERVING";
    case HealthStatus::kServiceUnknown:
      return "SERVICE_UNKNOWN";
  }
  return "UNKNOWN";
}

absl::StatusOr<std::unique_ptr<AttentionClient>> AttentionClient::Connect(
    const ClientOptions& options) {
  KeepGrpcRuntimeUp();
  if (options.connections < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("connections is ", options.connections, "; it must be >= 0 (0 = default)"));
  }
  if (options.split_calls_above_bytes < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("split_calls_above_bytes is ", options.split_calls_above_bytes,
                     "; it must be >= 0 (0 = never split)"));
  }
  std::vector<std::unique_ptr<Connection>> connections;
  for (int i = 0; i < options.ConnectionCount(); ++i) {
    absl::StatusOr<std::shared_ptr<grpc::Channel>> channel = internal::CreateChannel(options);
    if (!channel.ok()) return channel.status();
    connections.push_back(std::make_unique<Connection>(*std::move(channel)));
  }
  std::unique_ptr<AttentionClient> client(new AttentionClient(options, std::move(connections)));

  const std::shared_ptr<grpc::Channel>& first = client->channel();
  if (absl::Status connected = WaitForReady(*first, options); !connected.ok()) return connected;
  // The others connect once a call looks for a ready connection past the
  // first (ReadyConnectionFrom), in the background: a client that makes one
  // call opens one connection.
  if (options.fetch_server_info) {
    absl::StatusOr<pb::ServerInfo> info = client->GetServerInfo();
    if (!info.ok()) return info.status();
    client->server_info_ = *std::move(info);
  }

  int64_t threshold = options.stream_threshold_bytes;
  if (threshold <= 0) {
    const int64_t server_limit =
        client->server_info_.has_value() ? client->server_info_->limits().max_message_bytes() : 0;
    threshold = server_limit > 0 ? server_limit - kMessageSlack : kFallbackStreamThreshold;
    if (options.max_send_message_bytes > 0) {
      threshold = std::min(threshold, options.max_send_message_bytes - kMessageSlack);
    }
  }
  client->stream_threshold_bytes_ = threshold;
  return client;
}

AttentionClient::Connection::Connection(std::shared_ptr<grpc::Channel> c)
    : channel(std::move(c)), stub(pb::Attention::NewStub(channel)), generic_stub(channel) {}

AttentionClient::AttentionClient(const ClientOptions& options,
                                 std::vector<std::unique_ptr<Connection>> connections)
    : options_(options), connections_(std::move(connections)) {}

AttentionClient::Connection& AttentionClient::NextConnection() {
  return ReadyConnectionFrom(next_connection_.fetch_add(1, std::memory_order_relaxed));
}

AttentionClient::Connection& AttentionClient::ReadyConnectionFrom(uint64_t n) {
  const size_t count = connections_.size();
  for (size_t i = 0; i < count; ++i) {
    Connection& candidate = *connections_[(n + i) % count];
    // Asks an idle channel to connect, in the background: it joins the
    // rotation once READY.
    if (candidate.channel->GetState(/*try_to_connect=*/true) == GRPC_CHANNEL_READY) {
      return candidate;
    }
  }
  // None is ready (the first calls, or the server is away): the call waits
  // for this one's connection attempt, and fails as gRPC decides.
  return *connections_[n % count];
}

AttentionClient::~AttentionClient() {
  {
    absl::MutexLock lock(&mu_);
    mu_.Await(absl::Condition(
        +[](int64_t* in_flight) { return *in_flight == 0; }, &calls_in_flight_));
  }
  // Ends the leases: the server unregisters this client's regions and
  // closes its sessions.
  absl::MutexLock lock(&lease_mu_);
  region_lease_.reset();
  session_lease_.reset();
}

void AttentionClient::PrepareContext(grpc::ClientContext* context,
                                     absl::Duration timeout) const {
  if (timeout <= absl::ZeroDuration()) timeout = options_.rpc_timeout;
  PrepareContext(context, DeadlineAfter(timeout));
}

void AttentionClient::PrepareContext(grpc::ClientContext* context,
                                     std::chrono::system_clock::time_point deadline) const {
  context->set_deadline(deadline);
  for (const auto& [key, value] : options_.metadata) context->AddMetadata(key, value);
}

absl::Status AttentionClient::CallError(const grpc::Status& status, const char* rpc) const {
  return internal::FromGrpcStatus(status, rpc, options_.address);
}

void AttentionClient::CallStarted() {
  absl::MutexLock lock(&mu_);
  ++calls_in_flight_;
  ++calls_unanswered_;
}

void AttentionClient::CallAnswered() {
  absl::MutexLock lock(&mu_);
  --calls_unanswered_;
}

void AttentionClient::CallFinished() {
  absl::MutexLock lock(&mu_);
  --calls_in_flight_;
}

int AttentionClient::WantedShards(const AttentionInputs& inputs,
                                  const AttendOptions& options) const {
  const int64_t threshold = options_.split_calls_above_bytes;
  if (threshold <= 0 || !internal::SplittableCall(inputs, options) ||
      inputs.InputBytes() <= threshold) {
    return 1;
  }
  // A server with one worker runs the shards one after another: the call
  // only gets slower (the CPU backend's default: 361 against 326 ms whole).
  // With two or more, shards overlap there and each travels on its own
  // connection, which is where a large call's time goes on a GPU (8 shards
  // on 2 CUDA workers: 2.6x the whole call's rate, bench/RESULTS.md). A
  // server that does not say (0) may get shards.
  if (server_info_.has_value() && server_info_->limits().workers() == 1) return 1;
  return static_cast<int>(std::min<int64_t>(connection_count(), internal::MaxShards(inputs)));
}

int AttentionClient::ReserveCalls(int wanted) {
  absl::MutexLock lock(&mu_);
  const int64_t idle = connection_count() - calls_unanswered_;
  const int shards = static_cast<int>(std::min<int64_t>(wanted, idle));
  const int granted = shards >= 2 ? shards : 1;
  calls_in_flight_ += granted;
  calls_unanswered_ += granted;
  return granted;
}

bool AttentionClient::WouldStream(const AttentionInputs& inputs) const {
  const pb::AttendRequest header = internal::MakeRequestHeader(inputs, AttendOptions());
  return internal::EncodedRequestBytes(header, inputs.QBytes(), inputs.KvBytes()) >
         stream_threshold_bytes_;
}

absl::StatusOr<AttendResult> AttentionClient::Attend(const AttentionInputs& inputs,
                                                     const AttendOptions& options) {
  // The call borrows `inputs`: a non-owning shared_ptr whose "deleter"
  // signals when gRPC has dropped its last reference to the tensors, which
  // can be after the completion callback. Returning earlier would let the
  // caller free memory the transport still points at.
  absl::Notification released;
  absl::Notification finished;
  absl::StatusOr<AttendResult> result;
  {
    std::shared_ptr<const AttentionInputs> borrowed(
        &inputs, [&released](const AttentionInputs*) { released.Notify(); });
    AttendAsync(std::move(borrowed), options,
                [&result, &finished](absl::StatusOr<AttendResult> r) {
                  result = std::move(r);
                  finished.Notify();
                });
  }
  finished.WaitForNotification();
  released.WaitForNotification();
  return result;
}

absl::Status AttentionClient::CheckServerLimits(const AttentionInputs& geometry) const {
  if (!server_info_.has_value()) return absl::OkStatus();
  absl::Status within = internal::CheckTokenLimit(geometry, server_info_->limits());
  if (within.ok()) return within;
  return absl::Status(within.code(),
                      absl::StrCat("Attend to ", options_.address, ": ", within.message()));
}

void AttentionClient::AttendAsync(std::shared_ptr<const AttentionInputs> inputs,
                                  const AttendOptions& options, AttendCallback done) {
  absl::Status valid = inputs->Validate();
  if (valid.ok()) valid = CheckServerLimits(*inputs);
  if (!valid.ok()) {
    inputs.reset();
    std::move(done)(valid);
    return;
  }
  const bool by_reference = inputs->q_ref.set() || inputs->k_ref.set() || inputs->v_ref.set() ||
                            options.out_ref.set() || options.lse_ref.set();
  if (by_reference && options.transport == Transport::kStream) {
    inputs.reset();
    std::move(done)(absl::InvalidArgumentError(
        "tensors in shared-memory regions go over unary Attend; Transport::kStream takes none"));
    return;
  }
  bool stream = options.transport == Transport::kStream;
  // Region references keep the message small: never streamed.
  if (options.transport == Transport::kAuto) stream = !by_reference && WouldStream(*inputs);
  if (stream) {
    CallStarted();
    StartStream(std::move(inputs), options, std::move(done));
    return;
  }
  const int shards = ReserveCalls(WantedShards(*inputs, options));
  if (shards > 1) {
    StartSplit(std::move(inputs), options, shards, std::move(done));
  } else {
    StartUnary(std::move(inputs), options, std::move(done));
  }
}

namespace {

// State of one unary Attend call, from start to its completion callback.
struct UnaryCall {
  grpc::ClientContext context;
  grpc::ByteBuffer request;
  grpc::ByteBuffer response;
  std::shared_ptr<const AttentionInputs> inputs;
  AttendOptions options;
  AttendCallback done;
  int64_t start_ns = 0;
  int64_t marshal_ns = 0;
};

}  // namespace

void AttentionClient::StartUnary(std::shared_ptr<const AttentionInputs> inputs,
                                 const AttendOptions& options, AttendCallback done) {
  auto* call = new UnaryCall;
  call->start_ns = internal::MonotonicNanos();
  call->done = std::move(done);
  call->options = options;
  PrepareContext(&call->context, options.timeout);
  call->request =
      internal::EncodeAttendRequest(internal::MakeRequestHeader(*inputs, options), inputs);
  call->inputs = std::move(inputs);
  call->marshal_ns = internal::MonotonicNanos() - call->start_ns;

  NextConnection().generic_stub.UnaryCall(
      &call->context, kAttendMethod, grpc::StubOptions(), &call->request, &call->response,
      [this, call](grpc::Status status) {
        std::unique_ptr<UnaryCall> owned(call);
        absl::StatusOr<AttendResult> result;
        if (!status.ok()) {
          result = CallError(status, "Attend");
        } else {
          const int64_t unmarshal_start = internal::MonotonicNanos();
          internal::SlicedResponse response;
          AttendResult value;
          absl::Status taken = internal::ReadResponse(owned->response, &response);
          if (taken.ok()) {
            taken = internal::TakeResponse(response, *owned->inputs, owned->options, &value);
          }
          if (taken.ok()) {
            const int64_t end = internal::MonotonicNanos();
            value.client.marshal_ns = owned->marshal_ns;
            value.client.unmarshal_ns = end - unmarshal_start;
            value.client.round_trip_ns = end - owned->start_ns;
            result = std::move(value);
          } else {
            result = absl::Status(taken.code(), absl::StrCat("Attend to ", options_.address,
                                                             ": ", taken.message()));
          }
        }
        AttendCallback callback = std::move(owned->done);
        owned.reset();  // releases the request's hold on the inputs first
        CallAnswered();
        std::move(callback)(std::move(result));
        CallFinished();
      });
}

namespace {

// One shard of a split call.
struct ShardCall {
  internal::Shard shard;
  grpc::ClientContext context;
  grpc::ByteBuffer request;
  grpc::ByteBuffer response;
  std::shared_ptr<const AttentionInputs> inputs;  // the shard's own
  // Written under SplitCall::mu: from the call's start until this shard's
  // request went to gRPC, its answer's parse and scatter, its server timing.
  int64_t sent_ns = 0;
  int64_t unmarshal_ns = 0;
  ServerTiming server;
};

// State of a split call, shared by its shards' completion callbacks; the
// last one to finish delivers the result.
struct SplitCall {
  std::shared_ptr<const AttentionInputs> inputs;  // the whole call's
  // The caller's options, less out_destination: each shard's response is
  // taken whole, then scattered into `out_place`.
  AttendOptions options;
  AttendCallback done;
  // Filled before any shard starts, never resized: the shards' callbacks
  // scatter into disjoint bytes of these without the lock. `out_place` is
  // the caller's out_destination, or else out's bytes.
  std::vector<std::unique_ptr<ShardCall>> shards;
  std::string out;
  char* out_place = nullptr;
  std::vector<float> lse;
  int64_t start_ns = 0;

  absl::Mutex mu;
  int remaining ABSL_GUARDED_BY(mu) = 0;
  absl::Status failure ABSL_GUARDED_BY(mu);  // the first shard's failure
  AttendResult merged ABSL_GUARDED_BY(mu);   // metadata
  int last_shard ABSL_GUARDED_BY(mu) = 0;    // the shard whose answer came last
};

std::string ShardName(const SplitCall& call, size_t i) {
  const internal::Shard& s = call.shards[i]->shard;
  return absl::StrCat("shard ", i + 1, " of ", call.shards.size(), " (batch [", s.batch_begin,
                      ", ", s.batch_end, "), kv heads [", s.kv_head_begin, ", ", s.kv_head_end,
                      "))");
}

// Delivers a split call's result once every shard has finished.
void FinishSplit(const std::shared_ptr<SplitCall>& call) {
  absl::StatusOr<AttendResult> result;
  {
    absl::MutexLock lock(&call->mu);
    if (!call->failure.ok()) {
      result = call->failure;
    } else {
      AttendResult& merged = call->merged;
      merged.dtype = call->inputs->dtype;
      merged.shape = call->inputs->shape;
      merged.out = std::move(call->out);
      merged.lse = std::move(call->lse);
      // The call's figures are its last shard's (ClientTiming::shards says why).
      const ShardCall& last = *call->shards[static_cast<size_t>(call->last_shard)];
      merged.last_shard = call->last_shard;
      merged.server = last.server;
      merged.client.marshal_ns = last.sent_ns;
      merged.client.unmarshal_ns = last.unmarshal_ns;
      for (const std::unique_ptr<ShardCall>& shard : call->shards) {
        merged.shard_server.push_back(shard->server);
      }
      if (const int64_t kernel_ns = merged.SummedKernelNs(); kernel_ns > 0) {
        // FLOPs per nanosecond * 1e-3 = TFLOP/s.
        merged.kernel_tflops =
            call->inputs->Flops(call->options) / static_cast<double>(kernel_ns) * 1e-3;
      }
      merged.client.round_trip_ns = internal::MonotonicNanos() - call->start_ns;
      result = std::move(merged);
    }
  }
  AttendCallback done = std::move(call->done);
  // Releases this call's hold on the inputs first, as StartUnary does.
  call->shards.clear();
  call->inputs.reset();
  std::move(done)(std::move(result));
}

}  // namespace

void AttentionClient::StartSplit(std::shared_ptr<const AttentionInputs> inputs,
                                 const AttendOptions& options, int shards, AttendCallback done) {
  auto call = std::make_shared<SplitCall>();
  call->start_ns = internal::MonotonicNanos();
  call->options = options;
  call->options.out_destination = nullptr;
  call->done = std::move(done);
  const std::vector<internal::Shard> plan = internal::PlanShards(*inputs, shards);
  // Every shard gets the caller's deadline, not a fresh timeout each.
  const absl::Duration timeout =
      options.timeout > absl::ZeroDuration() ? options.timeout : options_.rpc_timeout;
  const std::chrono::system_clock::time_point deadline = DeadlineAfter(timeout);
  for (const internal::Shard& shard : plan) {
    auto part = std::make_unique<ShardCall>();
    part->shard = shard;
    PrepareContext(&part->context, deadline);
    call->shards.push_back(std::move(part));
  }
  if (options.out_destination != nullptr) {
    call->out_place = options.out_destination;
  } else {
    call->out.resize(static_cast<size_t>(inputs->QBytes()));
    call->out_place = call->out.data();
  }
  if (options.return_lse) call->lse.resize(static_cast<size_t>(inputs->LseElements()));
  call->inputs = std::move(inputs);
  {
    absl::MutexLock lock(&call->mu);
    call->remaining = static_cast<int>(plan.size());
    call->merged.client.shards = static_cast<int>(plan.size());
  }
  // PlanShards may give fewer shards than reserved (it does not for
  // ReserveCalls' counts, which MaxShards bounds); release the difference.
  for (size_t i = plan.size(); i < static_cast<size_t>(shards); ++i) {
    CallAnswered();
    CallFinished();
  }

  // Consecutive round-robin positions: distinct connections.
  const uint64_t first = next_connection_.fetch_add(plan.size(), std::memory_order_relaxed);
  // Builds shard i's request (a gather for head shards) and starts it.
  auto start_shard = [this, &call, &options, first](size_t i) {
    ShardCall& part = *call->shards[i];
    part.inputs = internal::ShardInputs(call->inputs, part.shard);
    part.request = internal::EncodeAttendRequest(
        internal::MakeRequestHeader(*part.inputs, options), part.inputs);
    {
      // Before the shard starts, so before any FinishSplit reads it.
      absl::MutexLock lock(&call->mu);
      part.sent_ns = internal::MonotonicNanos() - call->start_ns;
    }
    Connection& connection = ReadyConnectionFrom(first + i);
    connection.generic_stub.UnaryCall(
        &part.context, kAttendMethod, grpc::StubOptions(), &part.request, &part.response,
        [this, call, i](grpc::Status status) {
          ShardCall& finished = *call->shards[i];
          absl::Status failure;
          AttendResult value;
          const int64_t unmarshal_start = internal::MonotonicNanos();
          if (!status.ok()) {
            failure = CallError(status, "Attend");
          } else {
            internal::SlicedResponse response;
            failure = internal::ReadResponse(finished.response, &response);
            if (failure.ok()) {
              failure = internal::TakeResponseButOutput(response, *finished.inputs, call->options,
                                                        &value);
            }
            if (!failure.ok()) {
              failure = absl::Status(failure.code(), absl::StrCat("Attend to ", options_.address,
                                                                  ": ", failure.message()));
            }
            if (failure.ok()) {
              internal::ScatterOutput(*call->inputs, finished.shard, response.out,
                                      call->out_place);
              if (call->options.return_lse) {
                internal::ScatterLse(*call->inputs, finished.shard, value.lse, &call->lse);
              }
            }
          }
          const int64_t unmarshal_ns = internal::MonotonicNanos() - unmarshal_start;

          bool last = false;
          {
            absl::MutexLock lock(&call->mu);
            AttendResult& merged = call->merged;
            finished.unmarshal_ns = unmarshal_ns;
            if (!failure.ok() && call->failure.ok()) {
              call->failure = absl::Status(
                  failure.code(), absl::StrCat(failure.message(), " [", ShardName(*call, i),
                                               " of a call split over connections]"));
              // The call has failed: the other shards' work is wasted.
              for (size_t j = 0; j < call->shards.size(); ++j) {
                if (j != i) call->shards[j]->context.TryCancel();
              }
            }
            if (failure.ok()) {
              if (i == 0) merged.request_id = value.request_id;
              if (merged.kernel.empty()) {
                merged.kernel = value.kernel;
                merged.backend = value.backend;
                merged.device = value.device;
              }
              finished.server = value.server;
            }
            last = --call->remaining == 0;
            if (last) call->last_shard = static_cast<int>(i);
          }
          CallAnswered();
          if (last) FinishSplit(call);
          CallFinished();
        });
  };
  // The shards are built on threads of their own, so their gathers run in
  // parallel (one thread gathered 48 MiB of head shards in ~20 ms on the
  // H200 host, slower than the connections carried them); a call is split
  // only when this client has idle connections, so at low call rates, where
  // a thread per shard costs little beside the copy.
  std::vector<std::thread> builders;
  builders.reserve(plan.size() - 1);
  for (size_t i = 1; i < plan.size(); ++i) builders.emplace_back(start_shard, i);
  start_shard(0);
  for (std::thread& builder : builders) builder.join();
}

void AttentionClient::StartStream(std::shared_ptr<const AttentionInputs> inputs,
                                  const AttendOptions& options, AttendCallback done) {
  const int64_t start_ns = internal::MonotonicNanos();
  auto context = std::make_unique<grpc::ClientContext>();
  PrepareContext(context.get(), options.timeout);
  pb::AttendRequest header = internal::MakeRequestHeader(*inputs, options);
  char* const out_destination = options.out_ref.set() ? nullptr : options.out_destination;
  internal::AttendStreamCall::Start(
      NextConnection().stub.get(), std::move(context), std::move(header), std::move(inputs),
      options_.stream_chunk_bytes, start_ns, out_destination,
      [this, done = std::move(done)](const grpc::Status& status, AttendResult value) mutable {
        CallAnswered();
        if (status.ok()) {
          std::move(done)(std::move(value));
        } else {
          std::move(done)(CallError(status, "AttendStream"));
        }
        CallFinished();
      });
}

absl::StatusOr<pb::ListKernelsResponse> AttentionClient::ListKernels() {
  grpc::ClientContext context;
  PrepareContext(&context, absl::ZeroDuration());
  pb::ListKernelsResponse response;
  const grpc::Status status = connections_.front()->stub->ListKernels(&context, pb::ListKernelsRequest(), &response);
  if (!status.ok()) return CallError(status, "ListKernels");
  return response;
}

absl::StatusOr<pb::ServerInfo> AttentionClient::GetServerInfo() {
  grpc::ClientContext context;
  PrepareContext(&context, absl::ZeroDuration());
  pb::ServerInfo response;
  const grpc::Status status =
      connections_.front()->stub->GetServerInfo(&context, pb::GetServerInfoRequest(), &response);
  if (!status.ok()) return CallError(status, "GetServerInfo");
  return response;
}

absl::StatusOr<pb::ServerStats> AttentionClient::GetStats() {
  grpc::ClientContext context;
  PrepareContext(&context, absl::ZeroDuration());
  pb::ServerStats response;
  const grpc::Status status = connections_.front()->stub->GetStats(&context, pb::GetStatsRequest(), &response);
  if (!status.ok()) return CallError(status, "GetStats");
  return response;
}

absl::StatusOr<std::string> AttentionClient::LeaseId(internal::LeaseKind kind) {
  absl::MutexLock lock(&lease_mu_);
  std::unique_ptr<internal::Lease>& lease =
      kind == internal::LeaseKind::kRegions ? region_lease_ : session_lease_;
  if (lease == nullptr || !lease->alive()) {
    lease.reset();
    auto context = std::make_unique<grpc::ClientContext>();
    // No deadline: the lease lasts as long as this client.
    for (const auto& [key, value] : options_.metadata) context->AddMetadata(key, value);
    absl::StatusOr<std::unique_ptr<internal::Lease>> opened = internal::Lease::Open(
        kind, connections_.front()->stub.get(), std::move(context), options_.rpc_timeout);
    if (!opened.ok()) {
      return absl::Status(opened.status().code(),
                          absl::StrCat(internal::LeaseRpc(kind), " to ", options_.address, ": ",
                                       opened.status().message()));
    }
    lease = *std::move(opened);
  }
  return lease->id();
}

absl::StatusOr<pb::RegionInfo> AttentionClient::Register(pb::RegisterRegionRequest request) {
  absl::StatusOr<std::string> lease = LeaseId(internal::LeaseKind::kRegions);
  if (!lease.ok()) return lease.status();
  request.set_lease_id(*lease);
  grpc::ClientContext context;
  PrepareContext(&context, absl::ZeroDuration());
  pb::RegisterRegionResponse response;
  const grpc::Status status =
      connections_.front()->stub->RegisterRegion(&context, request, &response);
  if (!status.ok()) return CallError(status, "RegisterRegion");
  return response.region();
}

absl::StatusOr<pb::RegionInfo> AttentionClient::RegisterSystemRegion(const std::string& name,
                                                                     const std::string& shm_name,
                                                                     int64_t offset,
                                                                     int64_t byte_size) {
  pb::RegisterRegionRequest request;
  request.set_name(name);
  pb::SystemRegion* system = request.mutable_system();
  system->set_shm_name(shm_name);
  system->set_offset(offset);
  system->set_byte_size(byte_size);
  return Register(std::move(request));
}

absl::StatusOr<pb::RegionInfo> AttentionClient::RegisterCudaRegion(const std::string& name,
                                                                   const std::string& ipc_handle,
                                                                   int device, int64_t offset,
                                                                   int64_t byte_size) {
  pb::RegisterRegionRequest request;
  request.set_name(name);
  pb::CudaRegion* cuda = request.mutable_cuda();
  cuda->set_ipc_handle(ipc_handle);
  cuda->set_device_ordinal(device);
  cuda->set_offset(offset);
  cuda->set_byte_size(byte_size);
  return Register(std::move(request));
}

absl::Status AttentionClient::UnregisterRegion(const std::string& name) {
  absl::StatusOr<std::string> lease = LeaseId(internal::LeaseKind::kRegions);
  if (!lease.ok()) return lease.status();
  pb::UnregisterRegionRequest request;
  request.set_lease_id(*lease);
  request.set_name(name);
  grpc::ClientContext context;
  PrepareContext(&context, absl::ZeroDuration());
  pb::UnregisterRegionResponse response;
  const grpc::Status status =
      connections_.front()->stub->UnregisterRegion(&context, request, &response);
  if (!status.ok()) return CallError(status, "UnregisterRegion");
  return absl::OkStatus();
}

absl::StatusOr<std::vector<pb::RegionInfo>> AttentionClient::ListRegions() {
  absl::StatusOr<std::string> lease = LeaseId(internal::LeaseKind::kRegions);
  if (!lease.ok()) return lease.status();
  pb::ListRegionsRequest request;
  request.set_lease_id(*lease);
  grpc::ClientContext context;
  PrepareContext(&context, absl::ZeroDuration());
  pb::ListRegionsResponse response;
  const grpc::Status status =
      connections_.front()->stub->ListRegions(&context, request, &response);
  if (!status.ok()) return CallError(status, "ListRegions");
  return std::vector<pb::RegionInfo>(response.regions().begin(), response.regions().end());
}

template <typename Request, typename Response>
absl::StatusOr<Response> AttentionClient::SessionCall(const char* rpc,
                                                      SessionMethod<Request, Response> method,
                                                      Request request, absl::Duration timeout) {
  absl::StatusOr<std::string> lease = LeaseId(internal::LeaseKind::kSessions);
  if (!lease.ok()) return lease.status();
  request.set_lease_id(*lease);
  grpc::ClientContext context;
  PrepareContext(&context, timeout);
  Response response;
  const grpc::Status status =
      (connections_.front()->stub.get()->*method)(&context, request, &response);
  if (!status.ok()) return CallError(status, rpc);
  return response;
}

absl::StatusOr<pb::SessionInfo> AttentionClient::OpenSession(const pb::SessionConfig& config) {
  pb::OpenSessionRequest request;
  *request.mutable_config() = config;
  absl::StatusOr<pb::OpenSessionResponse> response = SessionCall(
      "OpenSession", &pb::Attention::Stub::OpenSession, std::move(request), absl::ZeroDuration());
  if (!response.ok()) return response.status();
  return response->session();
}

absl::StatusOr<pb::AttendSessionsResponse> AttentionClient::AttendSessions(
    pb::AttendSessionsRequest request, absl::Duration timeout) {
  absl::StatusOr<std::string> lease = LeaseId(internal::LeaseKind::kSessions);
  if (!lease.ok()) return lease.status();
  request.set_lease_id(*lease);
  grpc::ClientContext context;
  PrepareContext(&context, timeout);
  // Raw, as Attend: the tensors go to the transport from the request's own
  // strings, not copied into a send buffer by the generated serializer.
  const grpc::ByteBuffer request_bytes = internal::EncodeStepRequest(std::move(request));
  grpc::ByteBuffer response_bytes;
  absl::Notification done;
  grpc::Status status;
  connections_.front()->generic_stub.UnaryCall(
      &context, kAttendSessionsMethod, grpc::StubOptions(), &request_bytes, &response_bytes,
      [&status, &done](grpc::Status s) {
        status = std::move(s);
        done.Notify();
      });
  done.WaitForNotification();
  if (!status.ok()) return CallError(status, "AttendSessions");
  pb::AttendSessionsResponse response;
  if (grpc::Status parsed = grpc::SerializationTraits<pb::AttendSessionsResponse>::Deserialize(
          &response_bytes, &response);
      !parsed.ok()) {
    return absl::InternalError(absl::StrCat("AttendSessions to ", options_.address,
                                            ": the response is not an AttendSessionsResponse: ",
                                            parsed.error_message()));
  }
  return response;
}

absl::StatusOr<pb::SessionInfo> AttentionClient::TruncateSession(const std::string& session_id,
                                                                int64_t tokens) {
  pb::TruncateSessionRequest request;
  request.set_session_id(session_id);
  request.set_tokens(tokens);
  absl::StatusOr<pb::TruncateSessionResponse> response =
      SessionCall("TruncateSession", &pb::Attention::Stub::TruncateSession, std::move(request),
                  absl::ZeroDuration());
  if (!response.ok()) return response.status();
  return response->session();
}

absl::StatusOr<pb::SessionInfo> AttentionClient::ForkSession(const std::string& session_id) {
  pb::ForkSessionRequest request;
  request.set_session_id(session_id);
  absl::StatusOr<pb::ForkSessionResponse> response = SessionCall(
      "ForkSession", &pb::Attention::Stub::ForkSession, std::move(request), absl::ZeroDuration());
  if (!response.ok()) return response.status();
  return response->session();
}

absl::Status AttentionClient::CloseSession(const std::string& session_id) {
  pb::CloseSessionRequest request;
  request.set_session_id(session_id);
  return SessionCall("CloseSession", &pb::Attention::Stub::CloseSession, std::move(request),
                     absl::ZeroDuration())
      .status();
}

absl::StatusOr<std::vector<pb::SessionInfo>> AttentionClient::ListSessions() {
  absl::StatusOr<pb::ListSessionsResponse> response =
      SessionCall("ListSessions", &pb::Attention::Stub::ListSessions, pb::ListSessionsRequest(),
                  absl::ZeroDuration());
  if (!response.ok()) return response.status();
  return std::vector<pb::SessionInfo>(response->sessions().begin(), response->sessions().end());
}

absl::StatusOr<HealthStatus> AttentionClient::CheckHealth(const std::string& service) {
  grpc::ClientContext context;
  PrepareContext(&context, absl::ZeroDuration());
  const grpc::Slice request_slice(internal::EncodeHealthCheckRequest(service));
  const grpc::ByteBuffer request(&request_slice, 1);
  grpc::ByteBuffer response;
  absl::Notification done;
  grpc::Status status;
  connections_.front()->generic_stub.UnaryCall(&context, internal::kHealthCheckMethod, grpc::StubOptions(), &request,
                          &response, [&status, &done](grpc::Status s) {
                            status = std::move(s);
                            done.Notify();
                          });
  done.WaitForNotification();
  // The standard service answers NOT_FOUND for a service it does not know.
  if (status.error_code() == grpc::StatusCode::NOT_FOUND) return HealthStatus::kServiceUnknown;
  if (!status.ok()) return CallError(status, "Health.Check");
  grpc::Slice bytes;
  if (grpc::Status s = response.DumpToSingleSlice(&bytes); !s.ok()) {
    return CallError(s, "Health.Check");
  }
  absl::StatusOr<int> value = internal::DecodeHealthCheckResponse(absl::string_view(
      reinterpret_cast<const char*>(bytes.begin()), bytes.size()));
  if (!value.ok()) return value.status();
  if (*value < 0 || *value > static_cast<int>(HealthStatus::kServiceUnknown)) {
    return HealthStatus::kUnknown;
  }
  return static_cast<HealthStatus>(*value);
}

}  // namespace attn
