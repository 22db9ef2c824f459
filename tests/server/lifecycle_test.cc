// End-to-end lifecycle of the attn_server process: start-up on a free port,
// health, reflection, refusal of bad flags, and graceful shutdown on
// SIGTERM/SIGINT (drain delay, in-flight work finishing, drain timeout,
// second signal).
#include <signal.h>

#include <algorithm>
#include <chrono>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "attn/device.h"
#include "attnserve/v1/attention.grpc.pb.h"
#include "e2e_util.h"
#include "grpc/reflection/v1alpha/reflection.grpc.pb.h"
#include "grpcpp/client_context.h"
#include "gtest/gtest.h"
#include "server_process.h"

namespace attn::testing {
namespace {

namespace pb = ::attnserve::v1;
using grpc::health::v1::HealthCheckResponse;

// Polls until `predicate` holds (true) or 30 s pass (false).
template <typename Predicate>
bool Eventually(Predicate predicate) {
  const absl::Time deadline = absl::Now() + absl::Seconds(30);
  while (absl::Now() < deadline) {
    if (predicate()) return true;
    absl::SleepFor(absl::Milliseconds(5));
  }
  return false;
}

pb::AttendRequest SmallRequest(const std::string& id) {
  return MakeRequest(MakeRandomInputs({1, 16, 2, 64}, DType::kBFloat16, FreshSeed()), id);
}

// The AttendStream buffers of one SmallRequest (q, k, v and the output): the
// busy servers below have room for exactly one such call.
constexpr int64_t kStreamBudget = 4 * (16 * 2 * 64) * 2;

// An AttendStream call the test holds open: its header is sent, its tensors
// only when the test says so. Until then the server counts it as a call in
// flight, so the drain steps are watched without racing a kernel's run time.
struct HeldStream {
  std::unique_ptr<grpc::ClientContext> context = ContextWithDeadline(absl::Seconds(300));
  pb::AttendRequest request = SmallRequest("held");
  std::unique_ptr<grpc::ClientReaderWriter<pb::AttendStreamRequest, pb::AttendStreamResponse>>
      stream;

  // Reads the call to its end (sending nothing more) and returns its status.
  grpc::Status ReadToEnd(std::string* out = nullptr) {
    pb::AttendStreamResponse part;
    while (stream->Read(&part)) {
      if (out != nullptr && part.has_chunk()) out->append(part.chunk().data());
    }
    return stream->Finish();
  }
  // Sends q, k and v, half-closes, and reads the output.
  grpc::Status Complete(std::string* out) {
    if (stream->Write(Chunk(pb::TENSOR_Q, 0, request.q())) &&
        stream->Write(Chunk(pb::TENSOR_K, 0, request.k())) &&
        stream->Write(Chunk(pb::TENSOR_V, 0, request.v()))) {
      stream->WritesDone();
    }
    return ReadToEnd(out);
  }
};

// A CPU server with one call in flight: `held`, admitted by the server.
struct BusyServer {
  std::unique_ptr<ServerProcess> server;
  std::unique_ptr<pb::Attention::Stub> stub;
  HeldStream held;
};

// Starts `busy` with `extra_flags` and waits until the server has admitted
// its held call, which then holds the whole stream buffer budget: a probe too
// large for the budget is refused either way, and its message says how much
// of the budget other calls hold.
void StartBusyServer(const std::vector<std::string>& extra_flags, BusyServer* busy) {
  // The held call is an idle upload: keep it through the drain (the drain's
  // ending of idle uploads has its own tests).
  std::vector<std::string> flags = {"--backend=cpu", "--cpu_workers=1", "--cpu_threads=1",
                                    absl::StrCat("--max_stream_buffer_bytes=", kStreamBudget),
                                    "--drain_upload_idle_s=600"};
  flags.insert(flags.end(), extra_flags.begin(), extra_flags.end());
  auto server = ServerProcess::Start(flags);
  ASSERT_TRUE(server.ok()) << server.status();
  busy->server = std::move(*server);
  busy->stub = pb::Attention::NewStub(busy->server->NewChannel());
  busy->held.stream = busy->stub->AttendStream(busy->held.context.get());
  ASSERT_TRUE(busy->held.stream->Write(HeaderOf(busy->held.request)));
  pb::AttendRequest probe = SmallRequest("probe");
  probe.mutable_shape()->set_seq_len(32);  // twice the held call's size
  const std::string all_held = absl::StrCat(kStreamBudget, " of ", kStreamBudget, " are held");
  grpc::Status refused;
  ASSERT_TRUE(Eventually([&] {
    refused = SendRawStream(*busy->stub, {HeaderOf(probe)});
    return absl::StrContains(refused.error_message(), all_held);
  })) << "the held call was never admitted; last probe: "
      << refused.error_message();
}

// Waits up to `timeout` for the server to exit and expects a clean exit
// (status 0).
void ExpectCleanExit(ServerProcess& server, absl::Duration timeout) {
  auto exit = server.Wait(timeout);
  ASSERT_TRUE(exit.ok()) << exit.status();
  EXPECT_TRUE(exit->Clean()) << exit->ToString();
}

TEST(LifecycleTest, ServesHealthAndExitsZeroOnSigterm) {
  auto server = ServerProcess::Start({"--backend=cpu"});
  ASSERT_TRUE(server.ok()) << server.status();
  EXPECT_NE((*server)->port(), 0);

  for (const char* service : {"", "attnserve.v1.Attention"}) {
    auto health = (*server)->Health(service);
    ASSERT_TRUE(health.ok()) << service << ": " << health.status();
    EXPECT_EQ(*health, HealthCheckResponse::SERVING) << service;
  }
  auto unknown = (*server)->Health("no.such.Service");
  EXPECT_EQ(unknown.status().code(), absl::StatusCode::kNotFound) << unknown.status();

  auto exit = (*server)->Stop();
  ASSERT_TRUE(exit.ok()) << exit.status();
  EXPECT_TRUE(exit->Clean()) << exit->ToString();
}

TEST(LifecycleTest, ExitsZeroOnSigint) {
  auto server = ServerProcess::Start({"--backend=cpu"});
  ASSERT_TRUE(server.ok()) << server.status();
  ASSERT_TRUE((*server)->Signal(SIGINT).ok());
  ExpectCleanExit(**server, absl::Seconds(30));
}

// --max_connection_age_s closes idle-or-not connections after that age (so
// DNS-balanced clients re-resolve); the channel reconnects for the next call.
TEST(LifecycleTest, MaxConnectionAgeClosesConnections) {
  auto server = ServerProcess::Start({"--backend=cpu", "--max_connection_age_s=0.5"});
  ASSERT_TRUE(server.ok()) << server.status();
  std::shared_ptr<grpc::Channel> channel = (*server)->NewChannel();
  auto stub = pb::Attention::NewStub(channel);
  auto info = [&] {
    grpc::ClientContext context;
    context.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(10));
    pb::ServerInfo reply;
    return stub->GetServerInfo(&context, pb::GetServerInfoRequest(), &reply);
  };
  ASSERT_TRUE(info().ok());
  EXPECT_EQ(channel->GetState(false), GRPC_CHANNEL_READY);
  // Waiting on the state (not polling it) has the channel read the server's
  // GOAWAY as it arrives; an idle channel reads it only when gRPC's backup
  // poller runs (every 5 s).
  EXPECT_TRUE(channel->WaitForStateChange(GRPC_CHANNEL_READY,
                                          absl::ToChronoTime(absl::Now() + absl::Seconds(30))))
      << "connection outlived its max age";
  EXPECT_TRUE(info().ok()) << "the next call reconnects";
  auto exit = (*server)->Stop();
  ASSERT_TRUE(exit.ok()) << exit.status();
  EXPECT_TRUE(exit->Clean()) << exit->ToString();
}

TEST(LifecycleTest, ReflectionListsTheServices) {
  auto server = ServerProcess::Start({"--backend=cpu"});
  ASSERT_TRUE(server.ok()) << server.status();
  namespace refl = ::grpc::reflection::v1alpha;
  auto stub = refl::ServerReflection::NewStub((*server)->NewChannel());
  grpc::ClientContext context;
  context.set_deadline(absl::ToChronoTime(absl::Now() + absl::Seconds(10)));
  auto stream = stub->ServerReflectionInfo(&context);
  refl::ServerReflectionRequest request;
  request.set_list_services("");
  ASSERT_TRUE(stream->Write(request));
  stream->WritesDone();
  refl::ServerReflectionResponse response;
  ASSERT_TRUE(stream->Read(&response));
  std::vector<std::string> names;
  for (const auto& service : response.list_services_response().service()) {
    names.push_back(service.name());
  }
  EXPECT_NE(std::find(names.begin(), names.end(), "attnserve.v1.Attention"), names.end());
  EXPECT_NE(std::find(names.begin(), names.end(), "grpc.health.v1.Health"), names.end());
  while (stream->Read(&response)) {
  }
  EXPECT_TRUE(stream->Finish().ok());

  auto no_reflection = ServerProcess::Start({"--backend=cpu", "--reflection=false"});
  ASSERT_TRUE(no_reflection.ok()) << no_reflection.status();
  auto stub2 = refl::ServerReflection::NewStub((*no_reflection)->NewChannel());
  grpc::ClientContext context2;
  auto stream2 = stub2->ServerReflectionInfo(&context2);
  stream2->WritesDone();
  while (stream2->Read(&response)) {
  }
  EXPECT_EQ(stream2->Finish().error_code(), grpc::StatusCode::UNIMPLEMENTED);
}

TEST(LifecycleTest, BadFlagValueFailsStartup) {
  for (const char* flag : {"--backend=tpu", "--queue_capacity=-1", "--devices=zero",
                           "--max_message_bytes=10", "--listen=not-an-address"}) {
    ServerProcess::Options options;
    options.flags = {flag};
    options.start_timeout = absl::Seconds(20);
    auto server = ServerProcess::Start(options);
    ASSERT_FALSE(server.ok()) << flag;
    EXPECT_EQ(server.status().code(), absl::StatusCode::kAborted) << server.status();
  }
}

// The measurement mode: requests are checked as on the real backend, nothing
// is computed, and every output element and the response say so; with each
// response's output in a buffer of its own (the default) or in a shared one.
class TransportOnlyTest : public ::testing::TestWithParam<const char*> {};

TEST_P(TransportOnlyTest, ChecksRequestsAndAnswersNaN) {
  ServerProcess::Options options;
  options.flags = {"--backend=transport_only", GetParam()};
  auto server = ServerProcess::Start(options);
  ASSERT_TRUE(server.ok()) << server.status();
  auto stub = pb::Attention::NewStub((*server)->NewChannel());

  pb::ServerInfo info;
  auto info_context = ContextWithDeadline(absl::Seconds(10));
  ASSERT_TRUE(stub->GetServerInfo(info_context.get(), pb::GetServerInfoRequest(), &info).ok());
  EXPECT_TRUE(absl::StartsWith(info.backend(), "transport_only (measurement mode")) << info.backend();

  pb::AttendRequest request = SmallRequest("transport");
  request.set_return_lse(true);
  pb::AttendResponse response;
  auto context = ContextWithDeadline(absl::Seconds(30));
  const grpc::Status status = stub->Attend(context.get(), request, &response);
  ASSERT_TRUE(status.ok()) << status.error_message();
  EXPECT_EQ(response.backend(), info.backend());
  ASSERT_EQ(response.out().size(), request.q().size());
  EXPECT_TRUE(std::all_of(response.out().begin(), response.out().end(),
                          [](char c) { return c == '\xff'; }))
      << "an output element is not the NaN poison";
  EXPECT_EQ(response.lse().size(), request.q().size() / 2 / 64 * 4);  // one float per row
  EXPECT_TRUE(std::all_of(response.lse().begin(), response.lse().end(),
                          [](char c) { return c == '\xff'; }))
      << "an LSE element is not the NaN poison";

  // Checked like any request: a wrong byte count is refused, naming q.
  pb::AttendRequest bad = SmallRequest("transport-bad");
  bad.mutable_q()->pop_back();
  auto bad_context = ContextWithDeadline(absl::Seconds(30));
  const grpc::Status refused = stub->Attend(bad_context.get(), bad, &response);
  EXPECT_EQ(refused.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_TRUE(absl::StrContains(refused.error_message(), "q has")) << refused.error_message();
}

INSTANTIATE_TEST_SUITE_P(Outputs, TransportOnlyTest,
                         ::testing::Values("--transport_only_fresh_outputs",
                                           "--notransport_only_fresh_outputs"));

TEST(LifecycleTest, CudaBackendWithoutDeviceFailsStartup) {
  if (!ListCudaDevices().empty()) GTEST_SKIP() << "a CUDA device is visible";
  auto server = ServerProcess::Start({"--backend=cuda"});
  ASSERT_FALSE(server.ok());
  EXPECT_NE(server.status().message().find("exit code 1"), std::string::npos) << server.status();
}

// SIGTERM with a call in flight: health turns NOT_SERVING at once, the
// server keeps serving through --drain_delay_s, then refuses new calls with
// UNAVAILABLE while the call in flight completes, and exits 0.
TEST(LifecycleTest, GracefulShutdownFinishesInFlightWork) {
  BusyServer busy;
  ASSERT_NO_FATAL_FAILURE(StartBusyServer({"--drain_delay_s=0.3"}, &busy));
  ServerProcess& server = *busy.server;

  ASSERT_TRUE(server.Signal(SIGTERM).ok());
  EXPECT_TRUE(Eventually([&] {
    auto health = server.Health();
    return health.ok() && *health == HealthCheckResponse::NOT_SERVING;
  })) << "health never reported NOT_SERVING";

  grpc::Status refused;
  EXPECT_TRUE(Eventually([&] {
    // Accepted during the drain delay, such a call runs (the worker is idle).
    pb::AttendResponse response;
    auto context = ContextWithDeadline(absl::Seconds(30));
    refused = busy.stub->Attend(context.get(), SmallRequest("during-drain"), &response);
    return refused.error_code() == grpc::StatusCode::UNAVAILABLE;
  })) << "new calls were never refused; last: "
      << refused.error_message();

  // The drain waits for the call in flight, which still completes.
  std::string out;
  const grpc::Status held = busy.held.Complete(&out);
  EXPECT_TRUE(held.ok()) << held.error_message();
  EXPECT_EQ(out.size(), busy.held.request.q().size());
  ExpectCleanExit(server, absl::Seconds(30));
}

// Past --drain_timeout_s the calls still in flight are cancelled; the server
// exits 0.
TEST(LifecycleTest, DrainTimeoutCancelsWhatIsLeft) {
  BusyServer busy;
  ASSERT_NO_FATAL_FAILURE(StartBusyServer({"--drain_timeout_s=0.2"}, &busy));
  ASSERT_TRUE(busy.server->Signal(SIGTERM).ok());
  // The held call never sends its tensors. Cancelled by the server's
  // shutdown: the client sees the call cancelled or its connection closed,
  // depending on which it notices first.
  const grpc::Status held = busy.held.ReadToEnd();
  EXPECT_TRUE(held.error_code() == grpc::StatusCode::CANCELLED ||
              held.error_code() == grpc::StatusCode::UNAVAILABLE)
      << held.error_code() << ": " << held.error_message();
  ExpectCleanExit(*busy.server, absl::Seconds(30));
}

TEST(LifecycleTest, SecondSignalExitsAtOnce) {
  BusyServer busy;
  ASSERT_NO_FATAL_FAILURE(StartBusyServer({}, &busy));
  ASSERT_TRUE(busy.server->Signal(SIGTERM).ok());
  // Draining, and waiting (up to --drain_timeout_s) for the held call.
  ASSERT_TRUE(Eventually([&] {
    auto health = busy.server->Health();
    return health.ok() && *health == HealthCheckResponse::NOT_SERVING;
  })) << "health never reported NOT_SERVING";
  ASSERT_TRUE(busy.server->Signal(SIGINT).ok());
  auto exit = busy.server->Wait(absl::Seconds(30));
  ASSERT_TRUE(exit.ok()) << exit.status();
  EXPECT_TRUE(exit->exited && exit->exit_code == 1) << exit->ToString();
  EXPECT_FALSE(busy.held.ReadToEnd().ok());
}

}  // namespace
}  // namespace attn::testing
