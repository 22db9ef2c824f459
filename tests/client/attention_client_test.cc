// AttentionClient against the in-process fake service: results, transports
// (unary, streamed, automatic), async calls, and every error path the
// client itself detects.
#include "attn/client/attention_client.h"

#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include "absl/cleanup/cleanup.h"
#include "absl/strings/match.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/clock.h"
#include "attn/cpu_reference.h"
#include "fake_attention_service.h"
#include "gtest/gtest.h"
#include "test_util.h"

namespace attn {
namespace {

using ::attn::testing::FakeAttentionService;
using ::attn::testing::StartFakeServer;

// Random inputs in the client's form plus the float64 reference output.
struct Case {
  AttentionInputs inputs;
  std::vector<double> reference;
  std::string describe;
};

Case MakeCase(const Shape& shape, DType dtype) {
  const uint64_t seed = attn::testing::FreshSeed();
  attn::testing::HostInputs host = attn::testing::MakeRandomInputs(shape, dtype, seed);
  Case c;
  c.inputs.dtype = dtype;
  c.inputs.shape = shape;
  for (auto [dst, src] : {std::pair{&c.inputs.q, &host.q}, std::pair{&c.inputs.k, &host.k},
                          std::pair{&c.inputs.v, &host.v}}) {
    dst->assign(reinterpret_cast<const char*>(src->data()), src->size() * 2);
  }
  c.reference = AttentionNaiveF64(host.q_float.data(), host.k_float.data(), host.v_float.data(),
                                  shape, 1.0 / std::sqrt(static_cast<double>(shape.head_dim)));
  c.describe = attn::testing::Describe(host);
  return c;
}

double ErrorOf(const AttendResult& result, const Case& c) {
  std::vector<uint16_t> out(result.out.size() / 2);
  std::memcpy(out.data(), result.out.data(), result.out.size());
  return attn::testing::RelativeL2Error(out, result.dtype, c.reference);
}

std::unique_ptr<AttentionClient> ConnectTo(const std::string& address, ClientOptions options = {}) {
  options.address = address;
  absl::StatusOr<std::unique_ptr<AttentionClient>> client = AttentionClient::Connect(options);
  EXPECT_TRUE(client.ok()) << client.status();
  return client.ok() ? *std::move(client) : nullptr;
}

class AttentionClientTest : public ::testing::Test {
 protected:
  void SetUp() override {
    fake_ = StartFakeServer();
    ASSERT_NE(fake_, nullptr);
    client_ = ConnectTo(fake_->address);
    ASSERT_NE(client_, nullptr);
  }

  std::unique_ptr<attn::testing::FakeServer> fake_;
  std::unique_ptr<AttentionClient> client_;
};

TEST_F(AttentionClientTest, UnaryAttendMatchesFloat64Reference) {
  for (DType dtype : {DType::kFloat16, DType::kBFloat16}) {
    const Case c = MakeCase({2, 33, 3, 16}, dtype);
    absl::StatusOr<AttendResult> result = client_->Attend(c.inputs);
    ASSERT_TRUE(result.ok()) << result.status() << " " << c.describe;
    EXPECT_FALSE(result->client.streamed);
    EXPECT_EQ(result->shape, c.inputs.shape);
    EXPECT_EQ(result->dtype, dtype);
    EXPECT_LT(ErrorOf(*result, c), dtype == DType::kFloat16 ? 2e-3 : 1e-2) << c.describe;
    EXPECT_EQ(result->backend, "cpu");
    EXPECT_GT(result->server.total_ns, 0);
    EXPECT_GE(result->client.round_trip_ns,
              result->client.marshal_ns + result->client.unmarshal_ns);
  }
  EXPECT_EQ(fake_->service->unary_calls(), 2);
  EXPECT_EQ(fake_->service->stream_calls(), 0);
}

TEST_F(AttentionClientTest, StreamedAttendEqualsUnaryBitForBit) {
  ClientOptions options;
  options.stream_chunk_bytes = 777;  // many chunks, none aligned to an element
  std::unique_ptr<AttentionClient> client = ConnectTo(fake_->address, options);
  const Case c = MakeCase({1, 40, 2, 24}, DType::kBFloat16);
  AttendOptions stream;
  stream.transport = Transport::kStream;
  absl::StatusOr<AttendResult> streamed = client->Attend(c.inputs, stream);
  ASSERT_TRUE(streamed.ok()) << streamed.status();
  EXPECT_TRUE(streamed->client.streamed);
  EXPECT_GT(streamed->client.upload_ns, 0);
  AttendOptions unary;
  unary.transport = Transport::kUnary;
  absl::StatusOr<AttendResult> single = client->Attend(c.inputs, unary);
  ASSERT_TRUE(single.ok()) << single.status();
  EXPECT_EQ(streamed->out, single->out);
  EXPECT_EQ(fake_->service->stream_calls(), 1);
}

// The float64 reference of `in` under `options` (every feature), and its LSE.
std::vector<double> BreadthReference(const AttentionInputs& in, const AttendOptions& options,
                                     std::vector<double>* lse) {
  std::vector<float> q(in.q.size() / 2), k(in.k.size() / 2), v(in.v.size() / 2);
  ToFloat(in.q.data(), in.dtype, q.size(), q.data());
  ToFloat(in.k.data(), in.dtype, k.size(), k.data());
  ToFloat(in.v.data(), in.dtype, v.size(), v.data());
  return AttentionNaiveF64(in.Problem(options), q.data(), k.data(), v.data(),
                           in.varlen() ? in.cu_seqlens_q.data() : nullptr,
                           in.varlen() ? in.cu_seqlens_k.data() : nullptr, lse);
}

// Largest |got - want| over the finite values; -inf must match -inf.
double LseError(const std::vector<float>& got, const std::vector<double>& want) {
  double worst = got.size() == want.size() ? 0.0 : 1e30;
  for (size_t i = 0; i < std::min(got.size(), want.size()); ++i) {
    if (std::isinf(want[i]) || std::isinf(got[i])) {
      if (got[i] != want[i]) worst = 1e30;
      continue;
    }
    worst = std::max(worst, std::abs(got[i] - want[i]));
  }
  return worst;
}

TEST_F(AttentionClientTest, EveryFeatureMatchesFloat64ReferenceUnaryAndStreamed) {
  struct Feature {
    const char* name;
    AttentionInputs geometry;
    AttendOptions options;
  };
  std::vector<Feature> features;
  {
    Feature f{"gqa, kv_seq_len > seq_len, causal, lse", {}, {}};
    f.geometry.shape = Shape{2, 24, 4, 16};
    f.geometry.kv_seq_len = 37;
    f.geometry.kv_num_heads = 2;
    f.options.causal = true;
    f.options.return_lse = true;
    features.push_back(f);
  }
  {
    Feature f{"mqa, kv_seq_len < seq_len, window (5, 2), lse", {}, {}};
    f.geometry.shape = Shape{1, 40, 3, 8};
    f.geometry.kv_seq_len = 20;  // the first rows see no key under the mask
    f.geometry.kv_num_heads = 1;
    f.options.window_left = 5;
    f.options.window_right = 2;
    f.options.return_lse = true;
    features.push_back(f);
  }
  {
    Feature f{"varlen, causal, lse", {}, {}};
    f.geometry.shape = Shape{3, 0, 4, 16};
    f.geometry.kv_num_heads = 2;
    f.geometry.cu_seqlens_q = CumulativeSeqlens({7, 1, 30});
    f.geometry.cu_seqlens_k = CumulativeSeqlens({9, 4, 30});
    f.options.causal = true;
    f.options.return_lse = true;
    features.push_back(f);
  }
  ClientOptions client_options;
  client_options.stream_chunk_bytes = 333;
  std::unique_ptr<AttentionClient> client = ConnectTo(fake_->address, client_options);
  ASSERT_NE(client, nullptr);
  const uint64_t seed = attn::testing::FreshSeed();
  for (const Feature& f : features) {
    SCOPED_TRACE(::testing::Message() << f.name << ", seed " << seed);
    AttentionInputs geometry = f.geometry;
    geometry.dtype = DType::kFloat16;
    const AttentionInputs in = MakeRandomInputs(geometry, seed);
    ASSERT_TRUE(in.Validate().ok()) << in.Validate();
    std::vector<double> ref_lse;
    const std::vector<double> ref = BreadthReference(in, f.options, &ref_lse);
    for (Transport transport : {Transport::kUnary, Transport::kStream}) {
      AttendOptions options = f.options;
      options.transport = transport;
      absl::StatusOr<AttendResult> result = client->Attend(in, options);
      ASSERT_TRUE(result.ok()) << result.status();
      EXPECT_EQ(result->client.streamed, transport == Transport::kStream);
      std::vector<uint16_t> out(result->out.size() / 2);
      std::memcpy(out.data(), result->out.data(), result->out.size());
      EXPECT_LT(attn::testing::RelativeL2Error(out, in.dtype, ref), 2e-3);
      ASSERT_EQ(static_cast<int64_t>(result->lse.size()), in.LseElements());
      EXPECT_LT(LseError(result->lse, ref_lse), 1e-3);
    }
  }
  EXPECT_EQ(fake_->service->stream_calls(), 3);
}

TEST_F(AttentionClientTest, LseOnlyWhenAskedAndComplete) {
  const AttentionInputs in = MakeRandomInputs({1, 8, 2, 8}, DType::kBFloat16, 5);
  absl::StatusOr<AttendResult> result = client_->Attend(in);
  ASSERT_TRUE(result.ok()) << result.status();
  EXPECT_TRUE(result->lse.empty());
  AttendOptions options;
  options.return_lse = true;
  options.kernel = "short_lse";
  result = client_->Attend(in, options);
  EXPECT_EQ(result.status().code(), absl::StatusCode::kInternal) << result.status();
  EXPECT_TRUE(absl::StrContains(result.status().message(), "lse")) << result.status();
}

TEST(AttentionClientAutoStreamTest, StreamsRequestsAboveTheServersMessageLimit) {
  FakeAttentionService::Options fake_options;
  fake_options.max_message_bytes = 64 << 10;
  auto fake = StartFakeServer(fake_options);
  ASSERT_NE(fake, nullptr);
  std::unique_ptr<AttentionClient> client = ConnectTo(fake->address);
  ASSERT_NE(client, nullptr);
  EXPECT_LT(client->stream_threshold_bytes(), 64 << 10);

  const Case small = MakeCase({1, 16, 2, 32}, DType::kFloat16);   // 3 x 2 KiB
  const Case large = MakeCase({1, 128, 4, 64}, DType::kFloat16);  // 3 x 64 KiB
  EXPECT_FALSE(client->WouldStream(small.inputs));
  EXPECT_TRUE(client->WouldStream(large.inputs));
  absl::StatusOr<AttendResult> result = client->Attend(large.inputs);
  ASSERT_TRUE(result.ok()) << result.status();
  EXPECT_TRUE(result->client.streamed);
  EXPECT_LT(ErrorOf(*result, large), 2e-3) << large.describe;
  result = client->Attend(small.inputs);
  ASSERT_TRUE(result.ok()) << result.status();
  EXPECT_FALSE(result->client.streamed);
}

TEST_F(AttentionClientTest, ManyAsyncCallsShareOneInputAndAllComplete) {
  const Case c = MakeCase({1, 24, 2, 16}, DType::kBFloat16);
  auto inputs = std::make_shared<const AttentionInputs>(c.inputs);
  constexpr int kCalls = 32;
  absl::Mutex mu;
  int finished = 0;
  std::vector<std::string> outputs;
  for (int i = 0; i < kCalls; ++i) {
    AttendOptions options;
    options.transport = i % 2 == 0 ? Transport::kUnary : Transport::kStream;
    client_->AttendAsync(inputs, options, [&](absl::StatusOr<AttendResult> result) {
      absl::MutexLock lock(&mu);
      ++finished;
      if (result.ok()) outputs.push_back(std::move(result->out));
    });
  }
  {
    absl::MutexLock lock(&mu);
    mu.Await(absl::Condition(+[](int* n) { return *n == kCalls; }, &finished));
  }
  // The callbacks use this frame's locals: the client's destructor waits
  // until every callback has returned (and released `mu`), so the frame
  // outlives them.
  client_.reset();
  ASSERT_EQ(outputs.size(), static_cast<size_t>(kCalls));
  for (const std::string& out : outputs) EXPECT_EQ(out, outputs.front());
}

TEST_F(AttentionClientTest, DestructorWaitsForCallbacksInFlight) {
  auto inputs =
      std::make_shared<const AttentionInputs>(MakeRandomInputs({1, 64, 4, 32}, DType::kFloat16, 7));
  std::atomic<int> callbacks{0};
  for (int i = 0; i < 8; ++i) {
    client_->AttendAsync(inputs, {}, [&callbacks](absl::StatusOr<AttendResult>) { ++callbacks; });
  }
  client_.reset();
  EXPECT_EQ(callbacks.load(), 8);
}

TEST_F(AttentionClientTest, InvalidInputsFailLocally) {
  AttentionInputs inputs = MakeRandomInputs({1, 8, 2, 16}, DType::kFloat16, 1);
  inputs.k.pop_back();
  absl::StatusOr<AttendResult> result = client_->Attend(inputs);
  EXPECT_EQ(result.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_TRUE(absl::StrContains(result.status().message(), "k has")) << result.status();
  inputs = MakeRandomInputs({1, 0, 2, 16}, DType::kFloat16, 1);
  EXPECT_EQ(client_->Attend(inputs).status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(fake_->service->unary_calls(), 0);
}

TEST_F(AttentionClientTest, ServerErrorsKeepTheirCodeAndNameTheAddress) {
  const AttentionInputs inputs = MakeRandomInputs({1, 8, 2, 16}, DType::kFloat16, 1);
  for (Transport transport : {Transport::kUnary, Transport::kStream}) {
    AttendOptions options;
    options.kernel = "fail_invalid";
    options.transport = transport;
    absl::StatusOr<AttendResult> result = client_->Attend(inputs, options);
    EXPECT_EQ(result.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_TRUE(absl::StrContains(result.status().message(), "fail_invalid refuses"));
    EXPECT_TRUE(absl::StrContains(result.status().message(), fake_->address));
  }
}

TEST_F(AttentionClientTest, TimeoutGivesDeadlineExceeded) {
  const AttentionInputs inputs = MakeRandomInputs({1, 8, 2, 16}, DType::kFloat16, 1);
  for (Transport transport : {Transport::kUnary, Transport::kStream}) {
    AttendOptions options;
    options.kernel = "wait_cancel";
    options.timeout = absl::Milliseconds(200);
    options.transport = transport;
    EXPECT_EQ(client_->Attend(inputs, options).status().code(),
              absl::StatusCode::kDeadlineExceeded);
  }
}

TEST_F(AttentionClientTest, MalformedResponsesAreInternalErrors) {
  const AttentionInputs inputs = MakeRandomInputs({1, 16, 2, 64}, DType::kFloat16, 1);
  AttendOptions options;
  options.kernel = "short_output";
  options.transport = Transport::kUnary;
  absl::StatusOr<AttendResult> result = client_->Attend(inputs, options);
  EXPECT_EQ(result.status().code(), absl::StatusCode::kInternal) << result.status();
  options.kernel = "bad_offset";
  options.transport = Transport::kStream;
  result = client_->Attend(inputs, options);
  EXPECT_EQ(result.status().code(), absl::StatusCode::kInternal) << result.status();
  EXPECT_TRUE(absl::StrContains(result.status().message(), "malformed response stream"));
}

TEST_F(AttentionClientTest, MetadataCallsAndHealth) {
  ASSERT_TRUE(client_->server_info().has_value());
  EXPECT_EQ(client_->server_info()->backend(), "cpu");
  absl::StatusOr<attnserve::v1::ListKernelsResponse> kernels = client_->ListKernels();
  ASSERT_TRUE(kernels.ok()) << kernels.status();
  ASSERT_EQ(kernels->kernels_size(), 1);
  EXPECT_EQ(kernels->kernels(0).name(), "cpu_reference");
  EXPECT_TRUE(client_->GetStats().ok());
  absl::StatusOr<HealthStatus> health = client_->CheckHealth();
  ASSERT_TRUE(health.ok()) << health.status();
  EXPECT_EQ(*health, HealthStatus::kServing);
  health = client_->CheckHealth("no.such.Service");
  ASSERT_TRUE(health.ok()) << health.status();
  EXPECT_EQ(*health, HealthStatus::kServiceUnknown);
}

TEST(AttentionClientConnectTest, UnreachableAddressIsUnavailableAndNamesIt) {
  ClientOptions options;
  options.address = "127.0.0.1:1";  // nothing listens on port 1
  options.connect_timeout = absl::Seconds(2);
  absl::StatusOr<std::unique_ptr<AttentionClient>> client = AttentionClient::Connect(options);
  ASSERT_FALSE(client.ok());
  EXPECT_EQ(client.status().code(), absl::StatusCode::kUnavailable);
  EXPECT_TRUE(absl::StrContains(client.status().message(), "127.0.0.1:1")) << client.status();
}

TEST(AttentionClientConnectTest, ARefusedConnectionFailsLongBeforeTheConnectTimeout) {
  ClientOptions options;
  options.address = "127.0.0.1:1";  // refused at once
  options.connect_timeout = absl::Seconds(60);
  const absl::Time start = absl::Now();
  absl::StatusOr<std::unique_ptr<AttentionClient>> client = AttentionClient::Connect(options);
  const absl::Duration took = absl::Now() - start;
  ASSERT_FALSE(client.ok());
  EXPECT_EQ(client.status().code(), absl::StatusCode::kUnavailable);
  EXPECT_TRUE(absl::StrContains(client.status().message(), "refused")) << client.status();
  // About a second of retries; the bound leaves room for a loaded host.
  EXPECT_LT(took, absl::Seconds(20)) << client.status();
}

TEST(AttentionClientLimitsTest, ACallBeyondTheAnnouncedTokenLimitFailsBeforeItIsSent) {
  FakeAttentionService::Options fake_options;
  fake_options.max_tokens_per_request = 1000;
  auto fake = StartFakeServer(fake_options);
  ASSERT_NE(fake, nullptr);
  std::unique_ptr<AttentionClient> client = ConnectTo(fake->address);
  ASSERT_NE(client, nullptr);
  // q has 1 * 64 * 2 * 16 = 2048 elements; k (one KV head) 1024.
  AttentionInputs geometry;
  geometry.dtype = DType::kFloat16;
  geometry.shape = Shape{1, 64, 2, 16};
  const absl::Status q_over = client->CheckServerLimits(geometry);
  EXPECT_EQ(q_over.code(), absl::StatusCode::kResourceExhausted);
  for (const char* part : {"q needs 2048 elements", "[1, 64, 2, 16]", "limit is 1000",
                           "max_tokens_per_request", fake->address.c_str()}) {
    EXPECT_TRUE(absl::StrContains(q_over.message(), part)) << part << ": " << q_over;
  }
  geometry.shape = Shape{1, 31, 2, 16};  // q 992
  geometry.kv_seq_len = 40;              // k 1280
  const absl::Status k_over = client->CheckServerLimits(geometry);
  EXPECT_TRUE(absl::StrContains(k_over.message(), "k needs 1280 elements (shape [1, 40, 2, 16])"))
      << k_over;
  geometry.kv_seq_len = 0;
  EXPECT_TRUE(client->CheckServerLimits(geometry).ok());

  absl::StatusOr<AttendResult> result =
      client->Attend(MakeRandomInputs({1, 64, 2, 16}, DType::kFloat16, 1));
  EXPECT_EQ(result.status().code(), absl::StatusCode::kResourceExhausted) << result.status();
  EXPECT_EQ(fake->service->unary_calls(), 0);
}

std::string ReadFileOrEmpty(const std::string& path) {
  std::ifstream file(path);
  std::stringstream contents;
  contents << file.rdbuf();
  return contents.str();
}

TEST(AttentionClientTlsTest, ConnectsWithTheServersCertificateAndChecksItsName) {
  // A self-signed certificate for "attn.test", made with the openssl tool in a
  // directory of this test's own: test runs of other checkouts on the machine
  // would otherwise overwrite the pair while this one reads it.
  std::string dir = ::testing::TempDir() + "/attn_tls.XXXXXX";
  ASSERT_NE(mkdtemp(dir.data()), nullptr) << std::strerror(errno);
  const std::string key = dir + "/key.pem", cert = dir + "/cert.pem";
  absl::Cleanup remove_dir = [&] {
    std::remove(key.c_str());
    std::remove(cert.c_str());
    rmdir(dir.c_str());
  };
  const std::string command =
      "openssl req -x509 -newkey rsa:2048 -nodes -days 2 -subj /CN=attn.test "
      "-addext subjectAltName=DNS:attn.test -keyout " +
      key + " -out " + cert + " >/dev/null 2>&1";
  if (std::system(command.c_str()) != 0) GTEST_SKIP() << "no usable openssl command";

  grpc::SslServerCredentialsOptions ssl;
  ssl.pem_key_cert_pairs.push_back({ReadFileOrEmpty(key), ReadFileOrEmpty(cert)});
  FakeAttentionService::Options fake_options;
  fake_options.credentials = grpc::SslServerCredentials(ssl);
  auto fake = StartFakeServer(fake_options);
  ASSERT_NE(fake, nullptr);

  ClientOptions options;
  options.address = fake->address;
  options.tls.enabled = true;
  options.tls.root_certs_path = cert;
  options.tls.server_name_override = "attn.test";
  std::unique_ptr<AttentionClient> client = ConnectTo(fake->address, options);
  ASSERT_NE(client, nullptr);
  EXPECT_TRUE(client->Attend(MakeRandomInputs({1, 8, 1, 8}, DType::kFloat16, 1)).ok());

  // Without the override the certificate does not match 127.0.0.1.
  options.tls.server_name_override.clear();
  options.connect_timeout = absl::Seconds(2);
  EXPECT_EQ(AttentionClient::Connect(options).status().code(), absl::StatusCode::kUnavailable);
  // A plaintext client cannot talk to a TLS server either.
  options.tls.enabled = false;
  EXPECT_EQ(AttentionClient::Connect(options).status().code(), absl::StatusCode::kUnavailable);
}

TEST(AttentionClientConnectTest, UnreadableTlsFileIsInvalidArgument) {
  ClientOptions options;
  options.tls.enabled = true;
  options.tls.root_certs_path = "/nonexistent/roots.pem";
  absl::StatusOr<std::unique_ptr<AttentionClient>> client = AttentionClient::Connect(options);
  EXPECT_EQ(client.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_TRUE(absl::StrContains(client.status().message(), "/nonexistent/roots.pem"));
}

}  // namespace
}  // namespace attn
