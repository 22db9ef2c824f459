// The client library and attn_cli against the real attn_server on the CPU
// backend (spawned per suite by ServerProcess): results against the float64
// reference, streaming past the server's message limit, metadata calls,
// errors, .npy round trips and the CLI's exit codes.
#include <sys/wait.h>

#include <cstdio>
#include <cmath>
#include <cstring>
#include <limits>
#include <fstream>
#include <chrono>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/synchronization/mutex.h"
#include "attn/client/attention_client.h"
#include "attn/client/npy.h"
#include "attn/cpu_reference.h"
#include "breadth_cases.h"
#include "gtest/gtest.h"
#include "server_process.h"
#include "test_util.h"

namespace attn {
namespace {

using ::attn::testing::ServerProcess;

using ::attn::testing::kBreadthMaxMessageBytes;

double ErrorAgainstReference(const AttentionInputs& in, const AttendResult& result) {
  std::vector<float> q(in.shape.NumElements()), k(q.size()), v(q.size());
  ToFloat(in.q.data(), in.dtype, q.size(), q.data());
  ToFloat(in.k.data(), in.dtype, k.size(), k.data());
  ToFloat(in.v.data(), in.dtype, v.size(), v.data());
  const std::vector<double> ref = AttentionNaiveF64(
      q.data(), k.data(), v.data(), in.shape, 1.0 / std::sqrt(double(in.shape.head_dim)));
  std::vector<uint16_t> out(result.out.size() / 2);
  std::memcpy(out.data(), result.out.data(), result.out.size());
  return attn::testing::RelativeL2Error(out, in.dtype, ref);
}

struct CommandResult {
  int exit_code = -1;
  std::string out;
  std::string err;
};

std::string TempPath(const std::string& name) {
  return absl::StrCat(::testing::TempDir(), "/attn_e2e_", getpid(), "_", name);
}

// Runs attn_cli with `args` (no shell quoting needed: tests pass plain words).
CommandResult RunCli(const std::vector<std::string>& args) {
  const std::string err_path = TempPath("cli_stderr");
  const std::string command =
      absl::StrCat(ATTN_CLI_BINARY, " ", absl::StrJoin(args, " "), " 2>", err_path);
  CommandResult result;
  FILE* pipe = popen(command.c_str(), "r");
  if (pipe == nullptr) return result;
  char buffer[4096];
  size_t n;
  while ((n = fread(buffer, 1, sizeof(buffer), pipe)) > 0) result.out.append(buffer, n);
  const int status = pclose(pipe);
  result.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  std::ifstream err(err_path);
  std::stringstream contents;
  contents << err.rdbuf();
  result.err = contents.str();
  std::remove(err_path.c_str());
  return result;
}

class ClientE2eTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    absl::StatusOr<std::unique_ptr<ServerProcess>> server = attn::testing::StartBreadthServer();
    ASSERT_TRUE(server.ok()) << server.status();
    server_ = server->release();
  }
  static void TearDownTestSuite() {
    delete server_;
    server_ = nullptr;
  }
  void SetUp() override {
    ASSERT_NE(server_, nullptr);
    ClientOptions options;
    options.address = server_->address();
    absl::StatusOr<std::unique_ptr<AttentionClient>> client = AttentionClient::Connect(options);
    ASSERT_TRUE(client.ok()) << client.status();
    client_ = *std::move(client);
  }

  static ServerProcess* server_;
  std::unique_ptr<AttentionClient> client_;
};

ServerProcess* ClientE2eTest::server_ = nullptr;

TEST_F(ClientE2eTest, AttendMatchesTheFloat64Reference) {
  for (DType dtype : {DType::kFloat16, DType::kBFloat16}) {
    const uint64_t seed = attn::testing::FreshSeed();
    const AttentionInputs in = MakeRandomInputs({2, 37, 3, 32}, dtype, seed);
    absl::StatusOr<AttendResult> result = client_->Attend(in);
    ASSERT_TRUE(result.ok()) << result.status();
    EXPECT_FALSE(result->client.streamed);
    EXPECT_LT(ErrorAgainstReference(in, *result), 1e-2) << DTypeName(dtype) << " seed " << seed;
    EXPECT_EQ(result->backend, "cpu");
    EXPECT_EQ(result->kernel, "cpu_flash");
    EXPECT_GT(result->server.kernel_ns, 0);
    EXPECT_GE(result->server.total_ns, result->server.kernel_ns);
    EXPECT_GE(result->client.round_trip_ns, result->server.total_ns);
  }
}

// Every feature through the real server, unary and streamed (the server's
// message limit makes the larger case stream), against the float64
// reference with its LSE.
TEST_F(ClientE2eTest, EveryFeatureMatchesTheFloat64Reference) {
  const std::vector<attn::testing::BreadthCase> cases = attn::testing::BreadthCases();
  const uint64_t seed = attn::testing::FreshSeed();
  for (const attn::testing::BreadthCase& c : cases) {
    SCOPED_TRACE(::testing::Message() << c.name << ", seed " << seed);
    const AttentionInputs in = MakeRandomInputs(c.geometry, seed);
    ASSERT_TRUE(in.Validate().ok()) << in.Validate();
    absl::StatusOr<AttendResult> result = client_->Attend(in, c.options);
    ASSERT_TRUE(result.ok()) << result.status();
    EXPECT_EQ(result->client.streamed, client_->WouldStream(in));
    attn::testing::ExpectMatchesReference(in, c.options, result->out, result->lse);
  }
  EXPECT_TRUE(client_->WouldStream(MakeRandomInputs(cases[1].geometry, 1)));
}

TEST_F(ClientE2eTest, CliBreadthFlagsCheckAndWriteNpy) {
  const std::string out = TempPath("breadth_o.npy"), lse = TempPath("breadth_lse.npy");
  CommandResult r = RunCli({"attend", "--address=" + server_->address(), "--shape=2,40,4,32",
                            "--kv_shape=2,56,2,32", "--causal", "--window=8,-1", "--check",
                            "--out=" + out, "--lse_out=" + lse, "--dtype=fp16"});
  ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
  EXPECT_TRUE(absl::StrContains(r.out, "Sk=56, Hq=4, Hkv=2")) << r.out;
  EXPECT_TRUE(absl::StrContains(r.out, "lse max abs error")) << r.out;
  EXPECT_TRUE(absl::StrContains(r.out, "PASS")) << r.out;
  absl::StatusOr<NpyArray> o = ReadNpyFile(out);
  ASSERT_TRUE(o.ok()) << o.status();
  EXPECT_EQ(o->shape, (std::vector<int64_t>{2, 40, 4, 32}));
  absl::StatusOr<NpyArray> l = ReadNpyFile(lse);
  ASSERT_TRUE(l.ok()) << l.status();
  EXPECT_EQ(l->descr, "<f4");
  EXPECT_EQ(l->shape, (std::vector<int64_t>{2, 4, 40}));
  std::remove(out.c_str());
  std::remove(lse.c_str());

  // Varlen with sampled rows, streamed.
  r = RunCli({"attend", "--address=" + server_->address(), "--shape=1,1,2,16", "--seqlens_q=30,1,9",
              "--seqlens_k=12,4,40", "--causal", "--lse", "--check", "--check_rows=5",
              "--transport=stream"});
  ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
  EXPECT_TRUE(absl::StrContains(r.out, "varlen total_q=40 total_k=56")) << r.out;
  EXPECT_TRUE(absl::StrContains(r.out, "streamed")) << r.out;
  EXPECT_TRUE(absl::StrContains(r.out, "PASS")) << r.out;

  // The server names what it refuses; the CLI refuses malformed flags itself.
  r = RunCli(
      {"attend", "--address=" + server_->address(), "--shape=1,8,4,16", "--kv_shape=1,8,3,16"});
  EXPECT_EQ(r.exit_code, 2) << r.out << r.err;
  EXPECT_TRUE(absl::StrContains(r.err, "kv_num_heads")) << r.err;
  EXPECT_EQ(RunCli({"attend", "--window=1"}).exit_code, 2);
  EXPECT_EQ(RunCli({"attend", "--cu_seqlens_q=0,4"}).exit_code, 2);
}

TEST_F(ClientE2eTest, CliKernelsPrintsCapabilities) {
  const CommandResult r = RunCli({"kernels", "--address=" + server_->address()});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_TRUE(absl::StrContains(r.out, "features")) << r.out;
  EXPECT_TRUE(absl::StrContains(r.out, "causal,window,gqa,kv_len,lse,varlen")) << r.out;
}

TEST_F(ClientE2eTest, RequestsAboveTheServersMessageLimitAreStreamed) {
  ASSERT_TRUE(client_->server_info().has_value());
  EXPECT_EQ(client_->server_info()->limits().max_message_bytes(), kBreadthMaxMessageBytes);
  const uint64_t seed = attn::testing::FreshSeed();
  const AttentionInputs large = MakeRandomInputs({1, 128, 4, 64}, DType::kFloat16, seed);
  ASSERT_TRUE(client_->WouldStream(large));
  absl::StatusOr<AttendResult> streamed = client_->Attend(large);
  ASSERT_TRUE(streamed.ok()) << streamed.status();
  EXPECT_TRUE(streamed->client.streamed);
  EXPECT_LT(ErrorAgainstReference(large, *streamed), 1e-2) << "seed " << seed;

  // Under the limit both transports give the same bits.
  const AttentionInputs small = MakeRandomInputs({1, 32, 4, 64}, DType::kBFloat16, seed);
  AttendOptions unary, stream;
  unary.transport = Transport::kUnary;
  stream.transport = Transport::kStream;
  absl::StatusOr<AttendResult> a = client_->Attend(small, unary);
  absl::StatusOr<AttendResult> b = client_->Attend(small, stream);
  ASSERT_TRUE(a.ok() && b.ok()) << a.status() << " " << b.status();
  EXPECT_EQ(a->out, b->out);

  // Forcing unary past the limit gets the server's RESOURCE_EXHAUSTED.
  EXPECT_EQ(client_->Attend(large, unary).status().code(), absl::StatusCode::kResourceExhausted);
}

TEST_F(ClientE2eTest, ConcurrentAsyncCallsAllSucceed) {
  auto in = std::make_shared<const AttentionInputs>(
      MakeRandomInputs({1, 64, 2, 32}, DType::kBFloat16, 5));
  constexpr int kCalls = 24;
  absl::Mutex mu;
  int ok = 0, done = 0;
  for (int i = 0; i < kCalls; ++i) {
    client_->AttendAsync(in, {}, [&](absl::StatusOr<AttendResult> result) {
      absl::MutexLock lock(&mu);
      ++done;
      ok += result.ok() ? 1 : 0;
    });
  }
  {
    absl::MutexLock lock(&mu);
    mu.Await(absl::Condition(+[](int* n) { return *n == kCalls; }, &done));
  }
  // The callbacks use this frame's locals: the client's destructor waits
  // until every callback has returned (and released `mu`), so the frame
  // outlives them.
  client_.reset();
  EXPECT_EQ(ok, kCalls);
}

TEST_F(ClientE2eTest, AttendCallsSpreadOverTheClientsConnections) {
  ClientOptions options;
  options.address = server_->address();
  options.connections = 3;
  absl::StatusOr<std::unique_ptr<AttentionClient>> client = AttentionClient::Connect(options);
  ASSERT_TRUE(client.ok()) << client.status();
  ASSERT_EQ((*client)->connection_count(), 3);
  for (int i = 0; i < 3; ++i) {
    const AttentionInputs in = MakeRandomInputs({1, 32, 2, 16}, DType::kBFloat16, 40 + i);
    absl::StatusOr<AttendResult> result = (*client)->Attend(in);
    ASSERT_TRUE(result.ok()) << result.status();
    EXPECT_LT(ErrorAgainstReference(in, *result), 2e-2);
  }
  // Calls take a READY connection in turn and ask the others to connect in
  // the background (ReadyConnectionFrom: a connection that is still
  // connecting never holds a call up), so after these calls every channel
  // connects, though not necessarily before they returned: under load the
  // first call's connection may serve all three.
  for (int i = 0; i < 3; ++i) {
    EXPECT_TRUE((*client)->connection_channel(i)->WaitForConnected(
        std::chrono::system_clock::now() + std::chrono::seconds(30)))
        << "connection " << i << " never connected";
  }

  options.connections = -1;
  absl::StatusOr<std::unique_ptr<AttentionClient>> refused = AttentionClient::Connect(options);
  EXPECT_EQ(refused.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_TRUE(absl::StrContains(refused.status().message(), "connections")) << refused.status();
}

TEST_F(ClientE2eTest, ServerErrorsAndQueries) {
  const AttentionInputs bad = MakeRandomInputs({1, 4, 1, 513}, DType::kFloat16, 1);
  absl::StatusOr<AttendResult> result = client_->Attend(bad);
  EXPECT_EQ(result.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_TRUE(absl::StrContains(result.status().message(), "head_dim")) << result.status();
  EXPECT_TRUE(absl::StrContains(result.status().message(), server_->address()));

  absl::StatusOr<attnserve::v1::ListKernelsResponse> kernels = client_->ListKernels();
  ASSERT_TRUE(kernels.ok()) << kernels.status();
  ASSERT_GE(kernels->kernels_size(), 1);
  EXPECT_EQ(kernels->kernels(0).name(), "cpu_reference");
  absl::StatusOr<attnserve::v1::ServerStats> stats = client_->GetStats();
  ASSERT_TRUE(stats.ok()) << stats.status();
  EXPECT_GE(stats->requests_failed(), 1);
  absl::StatusOr<HealthStatus> health = client_->CheckHealth();
  ASSERT_TRUE(health.ok()) << health.status();
  EXPECT_EQ(*health, HealthStatus::kServing);
}

TEST_F(ClientE2eTest, RoundRobinOverADnsTarget) {
  ClientOptions options;
  options.address = "dns:///" + server_->address();
  options.load_balancing_policy = "round_robin";
  absl::StatusOr<std::unique_ptr<AttentionClient>> client = AttentionClient::Connect(options);
  ASSERT_TRUE(client.ok()) << client.status();
  EXPECT_TRUE((*client)->Attend(MakeRandomInputs({1, 8, 2, 16}, DType::kFloat16, 3)).ok());
}

TEST_F(ClientE2eTest, CliAttendChecksAndPrintsTheBreakdown) {
  const CommandResult r = RunCli({"attend", "--address=" + server_->address(),
                                  "--shape=1,32,2,16", "--dtype=fp16", "--check", "--repeat=2"});
  ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
  for (const char* row : {"client marshal", "network + gRPC", "server queue", "server H2D",
                          "server kernel", "server D2H", "client unmarshal", "round trip",
                          "PASS"}) {
    EXPECT_TRUE(absl::StrContains(r.out, row)) << row << "\n" << r.out;
  }
  // A sampled check (the default for long sequences) compares chosen rows.
  const CommandResult sampled =
      RunCli({"attend", "--address=" + server_->address(), "--shape=1,300,2,16", "--check",
              "--check_rows=7"});
  ASSERT_EQ(sampled.exit_code, 0) << sampled.out << sampled.err;
  EXPECT_TRUE(absl::StrContains(sampled.out, "7 of 300 query rows per head")) << sampled.out;
}

TEST_F(ClientE2eTest, CliSessionChecksBatchesInFlightAgainstFloat64) {
  // 5 sessions dealt into 2 batches, stepped by two threads at once:
  // prefill in chunks, then decode, every output checked against float64.
  const CommandResult r =
      RunCli({"session", "--address=" + server_->address(), "--session_shape=2,4,2,16",
              "--sessions=5", "--batches=2", "--prompt=70", "--chunk=32", "--generate=3",
              "--check", "--seed=7"});
  ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
  EXPECT_TRUE(absl::StrContains(r.out, "5 sessions in 2 batch(es) in flight")) << r.out;
  // 2 batches x 3 prefill chunks x 2 layers; 2 batches x 3 steps x 2 layers.
  EXPECT_TRUE(absl::StrContains(r.out, "prefill: 12 calls")) << r.out;
  EXPECT_TRUE(absl::StrContains(r.out, "decode:  12 calls")) << r.out;
  EXPECT_TRUE(absl::StrContains(r.out, "): ok")) << r.out;
  const CommandResult usage = RunCli({"session", "--sessions=2", "--batches=3"});
  EXPECT_EQ(usage.exit_code, 2);
  EXPECT_TRUE(absl::StrContains(usage.err, "--batches is 3")) << usage.err;
}

TEST_F(ClientE2eTest, CliNpyRoundTripForFp16AndBf16) {
  for (DType dtype : {DType::kFloat16, DType::kBFloat16}) {
    const AttentionInputs in = MakeRandomInputs({1, 24, 2, 32}, dtype, 11);
    const std::string q = TempPath("q.npy"), k = TempPath("k.npy"), v = TempPath("v.npy"),
                      o = TempPath("o.npy");
    ASSERT_TRUE(WriteTensorNpy(q, dtype, in.shape, in.q).ok());
    ASSERT_TRUE(WriteTensorNpy(k, dtype, in.shape, in.k).ok());
    ASSERT_TRUE(WriteTensorNpy(v, dtype, in.shape, in.v).ok());
    const CommandResult r = RunCli({"attend", "--address=" + server_->address(), "--q=" + q,
                                    "--k=" + k, "--v=" + v, "--out=" + o});
    ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
    absl::StatusOr<NpyTensor> out = ReadTensorNpy(o, std::nullopt);
    ASSERT_TRUE(out.ok()) << out.status();
    EXPECT_EQ(out->dtype, dtype);
    EXPECT_EQ(out->shape, in.shape);
    absl::StatusOr<AttendResult> direct = client_->Attend(in);
    ASSERT_TRUE(direct.ok()) << direct.status();
    EXPECT_EQ(out->bytes, direct->out) << DTypeName(dtype);
    for (const std::string& path : {q, k, v, o}) std::remove(path.c_str());
  }
}

TEST_F(ClientE2eTest, CliExitCodes) {
  CommandResult r = RunCli({"health", "--address=" + server_->address()});
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.out, "SERVING\n");
  r = RunCli({"info", "--address=127.0.0.1:1", "--connect_timeout=1s"});
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_TRUE(absl::StrContains(r.err, "cannot connect")) << r.err;
  EXPECT_TRUE(absl::StrContains(r.err, "127.0.0.1:1")) << r.err;
  r = RunCli({"attend", "--address=" + server_->address(), "--shape=1,16,2,16", "--check",
              "--tolerance=1e-12"});
  EXPECT_EQ(r.exit_code, 3) << r.out << r.err;
  EXPECT_EQ(RunCli({"attend", "--transport=carrier-pigeon"}).exit_code, 2);
  EXPECT_EQ(RunCli({}).exit_code, 2);
}

TEST_F(ClientE2eTest, CliRefusesWhatTheServerWouldBeforeMakingTheInputs) {
  // 2^34 elements a tensor (32 GiB of bf16): drawing them would take the
  // host's memory and many minutes; the server's limit (2^25) is known from
  // GetServerInfo, so attn_cli stops before.
  CommandResult r =
      RunCli({"attend", "--address=" + server_->address(), "--shape=64,65536,32,128"});
  EXPECT_EQ(r.exit_code, 1) << r.out << r.err;
  for (const char* part : {"RESOURCE_EXHAUSTED", "q needs 17179869184 elements",
                           "max_tokens_per_request"}) {
    EXPECT_TRUE(absl::StrContains(r.err, part)) << part << ": " << r.err;
  }
}

TEST_F(ClientE2eTest, CliErrorsSayWhy) {
  const std::string missing = TempPath("missing.npy");
  CommandResult r = RunCli({"attend", "--address=" + server_->address(), "--q=" + missing,
                            "--k=" + missing, "--v=" + missing});
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_TRUE(absl::StrContains(r.err, "cannot open '" + missing + "': No such file or directory"))
      << r.err;
  r = RunCli({"attend", "--address=" + server_->address(), "--shape=1,16,8,16",
              "--kv_shape=1,16,3,16"});
  EXPECT_EQ(r.exit_code, 2) << r.err;
  EXPECT_TRUE(absl::StrContains(r.err, "kv_num_heads is 3; it must divide num_heads (8)")) << r.err;
  EXPECT_FALSE(absl::StrContains(r.err, "(0: num_heads)")) << r.err;
}

}  // namespace
}  // namespace attn
