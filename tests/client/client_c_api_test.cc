// The client's C ABI (attn/client/c_api.h) against the real attn_server on
// the CPU backend: results against the float64 reference and byte for byte
// against the C++ client, every FlashAttention-2 option, errors mapped to
// status codes with the server's message, one handle shared by threads.
//
// Linked with the ABI's objects, not libattn_client_c.so: this process also
// links the server harness, whose health stubs the .so carries too
// (client/c_api/CMakeLists.txt). The Python tests load the .so itself.
#include "attn/client/c_api.h"

#include <cstring>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/match.h"
#include "attn/client/attention_client.h"
#include "attnserve/v1/attention.pb.h"
#include "breadth_cases.h"
#include "gtest/gtest.h"
#include "server_process.h"
#include "test_util.h"

namespace attn {
namespace {

using ::attn::testing::ServerProcess;

struct ClientCloser {
  void operator()(attn_client_t* client) const { attn_client_close(client); }
};
using ClientHandle = std::unique_ptr<attn_client_t, ClientCloser>;

// One call through the ABI on `in` (a geometry from AttentionInputs, so the
// same tensors can go through the C++ client too).
struct AbiCall {
  int code = -1;
  std::string error;
  std::string out;
  std::vector<float> lse;
  attn_client_timing_t timing{};
};

AbiCall Attend(attn_client_t* client, const AttentionInputs& in, const AttendOptions& options,
               int dtype_override = -1) {
  AbiCall call;
  call.out.assign(in.q.size(), '\xff');
  call.lse.assign(options.return_lse ? in.LseElements() : 0, std::nanf(""));
  char error[512] = "untouched";
  const bool varlen = in.varlen();
  call.code = attn_client_attend(
      client, options.kernel.c_str(),
      dtype_override >= 0 ? dtype_override
                          : (in.dtype == DType::kBFloat16 ? ATTN_DTYPE_BFLOAT16 : ATTN_DTYPE_FLOAT16),
      in.q.data(), in.k.data(), in.v.data(), call.out.data(),
      options.return_lse ? call.lse.data() : nullptr, varlen ? in.cu_seqlens_q.data() : nullptr,
      varlen ? in.cu_seqlens_k.data() : nullptr, in.shape.batch, in.shape.seq_len, in.kv_seq_len,
      in.shape.num_heads, in.kv_num_heads, in.shape.head_dim, options.causal ? 1 : 0,
      options.window_left, options.window_right, options.softmax_scale.value_or(0.0f),
      in.TokensQ(), in.TokensKv(), /*timeout_s=*/0, ATTN_TRANSPORT_AUTO, /*request_id=*/nullptr,
      &call.timing, error, sizeof(error));
  call.error = call.code == 0 ? "" : error;
  return call;
}

class ClientCApiTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    absl::StatusOr<std::unique_ptr<ServerProcess>> started = attn::testing::StartBreadthServer();
    ASSERT_TRUE(started.ok()) << started.status();
    server_ = *std::move(started);
  }
  static void TearDownTestSuite() { server_.reset(); }
  void SetUp() override {
    ASSERT_NE(server_, nullptr);
    attn_client_options_t options;
    attn_client_options_init(&options);
    options.address = server_->address().c_str();
    attn_client_t* client = nullptr;
    char error[256];
    ASSERT_EQ(attn_client_connect(&options, &client, error, sizeof(error)), 0) << error;
    client_.reset(client);
  }

  static inline std::unique_ptr<ServerProcess> server_;
  ClientHandle client_;
};

TEST(ClientCApiOptionsTest, InitWritesTheCppClientsDefaults) {
  attn_client_options_t options;
  std::memset(&options, 0x5a, sizeof(options));
  attn_client_options_init(&options);
  const ClientOptions defaults;
  EXPECT_STREQ(options.address, defaults.address.c_str());
  EXPECT_EQ(options.connect_timeout_s, absl::ToDoubleSeconds(defaults.connect_timeout));
  EXPECT_EQ(options.rpc_timeout_s, absl::ToDoubleSeconds(defaults.rpc_timeout));
  EXPECT_EQ(options.max_message_bytes, defaults.max_receive_message_bytes);
  EXPECT_EQ(options.stream_chunk_bytes, defaults.stream_chunk_bytes);
  EXPECT_EQ(options.fetch_server_info, 1);
  EXPECT_EQ(options.tls, 0);
  EXPECT_EQ(options.metadata, nullptr);
  EXPECT_EQ(options.metadata_pairs, 0u);
}

TEST(ClientCApiOptionsTest, UnreachableAddressIsUnavailableNamingIt) {
  attn_client_options_t options;
  attn_client_options_init(&options);
  options.address = "127.0.0.1:1";  // nothing listens on port 1
  options.connect_timeout_s = 0.2;
  attn_client_t* client = reinterpret_cast<attn_client_t*>(&options);
  char error[256] = "";
  EXPECT_EQ(attn_client_connect(&options, &client, error, sizeof(error)), 14);  // UNAVAILABLE
  EXPECT_EQ(client, nullptr);
  EXPECT_TRUE(absl::StrContains(error, "127.0.0.1:1")) << error;
}

TEST_F(ClientCApiTest, AttendMatchesTheReferenceAndTheCppClientByteForByte) {
  ClientOptions cpp_options;
  cpp_options.address = server_->address();
  absl::StatusOr<std::unique_ptr<AttentionClient>> cpp = AttentionClient::Connect(cpp_options);
  ASSERT_TRUE(cpp.ok()) << cpp.status();

  // The shared breadth cases, and fp16 self-attention with a scale.
  std::vector<attn::testing::BreadthCase> cases = attn::testing::BreadthCases();
  cases.push_back({"fp16 self-attention, scale 0.25", {}, {}});
  cases.back().geometry.dtype = DType::kFloat16;
  cases.back().geometry.shape = Shape{2, 37, 3, 32};
  cases.back().options.softmax_scale = 0.25f;
  const uint64_t seed = attn::testing::FreshSeed();
  for (const attn::testing::BreadthCase& f : cases) {
    SCOPED_TRACE(::testing::Message() << f.name << ", seed " << seed);
    const AttentionInputs in = MakeRandomInputs(f.geometry, seed);
    const AbiCall call = Attend(client_.get(), in, f.options);
    ASSERT_EQ(call.code, 0) << call.error;
    attn::testing::ExpectMatchesReference(in, f.options, call.out, call.lse);

    // The CPU backend is deterministic: the C++ client gets the same bytes.
    absl::StatusOr<AttendResult> direct = (*cpp)->Attend(in, f.options);
    ASSERT_TRUE(direct.ok()) << direct.status();
    EXPECT_EQ(call.out, direct->out);
    EXPECT_EQ(call.lse, direct->lse);
    EXPECT_EQ(call.timing.streamed != 0, direct->client.streamed);
    EXPECT_STREQ(call.timing.backend, "cpu");
    EXPECT_STREQ(call.timing.kernel, direct->kernel.c_str());
    EXPECT_GT(call.timing.kernel_ns, 0);
    // A unary call is built before it is sent; a streamed call's chunks are
    // built while the server, whose clock starts when the stream arrives,
    // already receives: there the two overlap, and under load (a chunk's
    // build preempted) their sum can exceed the round trip.
    if (call.timing.streamed != 0) {
      EXPECT_GE(call.timing.round_trip_ns, call.timing.total_ns);
      EXPECT_GE(call.timing.round_trip_ns, call.timing.marshal_ns);
    } else {
      EXPECT_GE(call.timing.round_trip_ns, call.timing.total_ns + call.timing.marshal_ns);
    }
    EXPECT_NE(call.timing.request_id[0], '\0');
  }
  EXPECT_EQ(attn_client_stream_threshold_bytes(client_.get()), (*cpp)->stream_threshold_bytes());
}

TEST_F(ClientCApiTest, ServerRefusalKeepsItsCodeAndMessage) {
  // Valid geometry for the client; head_dim 1024 is beyond every kernel.
  AttentionInputs in = MakeRandomInputs(Shape{1, 4, 1, 1024}, DType::kFloat16, 1);
  const AbiCall call = Attend(client_.get(), in, {});
  EXPECT_EQ(call.code, 3);  // INVALID_ARGUMENT
  EXPECT_TRUE(absl::StrContains(call.error, "head_dim")) << call.error;
  EXPECT_TRUE(absl::StrContains(call.error, server_->address())) << call.error;
}

TEST_F(ClientCApiTest, BadGeometryIsRefusedBeforeSendingNamingTheField) {
  AttentionInputs in = MakeRandomInputs(Shape{1, 8, 4, 16}, DType::kBFloat16, 2);
  in.kv_num_heads = 3;  // does not divide 4
  in.k.resize(static_cast<size_t>(in.KvBytes()));
  in.v.resize(in.k.size());
  AbiCall call = Attend(client_.get(), in, {});
  EXPECT_EQ(call.code, 3);
  EXPECT_TRUE(absl::StrContains(call.error, "kv_num_heads is 3")) << call.error;

  in = MakeRandomInputs(Shape{1, 8, 4, 16}, DType::kBFloat16, 2);
  call = Attend(client_.get(), in, {}, /*dtype_override=*/7);
  EXPECT_EQ(call.code, 3);
  EXPECT_TRUE(absl::StrContains(call.error, "dtype is 7")) << call.error;

  // Varlen offsets that end past the caller's tokens are refused before q is read.
  AttentionInputs varlen;
  varlen.shape = Shape{2, 0, 2, 16};
  varlen.cu_seqlens_q = CumulativeSeqlens({3, 4});
  varlen.cu_seqlens_k = CumulativeSeqlens({3, 4});
  varlen = MakeRandomInputs(varlen, 3);
  std::string out(varlen.q.size(), '\0');
  char error[256];
  EXPECT_EQ(attn_client_attend(client_.get(), nullptr, ATTN_DTYPE_BFLOAT16, varlen.q.data(),
                               varlen.k.data(), varlen.v.data(), out.data(), nullptr,
                               varlen.cu_seqlens_q.data(), varlen.cu_seqlens_k.data(), 2, 0, 0, 2,
                               2, 16, 0, -1, -1, 0.0f, /*total_q=*/5, /*total_k=*/7, 0,
                               ATTN_TRANSPORT_AUTO, nullptr, nullptr, error, sizeof(error)),
            3);
  EXPECT_TRUE(absl::StrContains(error, "cu_seqlens_q ends at 7 but total_q is 5")) << error;
}

TEST_F(ClientCApiTest, ErrorMessagesAreTruncatedAndTerminated) {
  AttentionInputs in = MakeRandomInputs(Shape{1, 8, 4, 16}, DType::kBFloat16, 2);
  std::string out(in.q.size(), '\0');
  char error[8];
  std::memset(error, 'x', sizeof(error));
  EXPECT_EQ(attn_client_attend(client_.get(), nullptr, ATTN_DTYPE_BFLOAT16, in.q.data(),
                               in.k.data(), in.v.data(), out.data(), nullptr, nullptr, nullptr, 1,
                               8, 8, 4, 4, 16, 0, -1, -1, 0.0f, 0, 0, 0, /*transport=*/9, nullptr,
                               nullptr, error, sizeof(error)),
            3);
  EXPECT_STREQ(error, "transpo");
}

TEST_F(ClientCApiTest, OneHandleServesManyThreads) {
  const AttentionInputs in = MakeRandomInputs(Shape{1, 64, 2, 32}, DType::kFloat16, 4);
  const AbiCall first = Attend(client_.get(), in, {});
  ASSERT_EQ(first.code, 0) << first.error;
  constexpr int kThreads = 8;
  std::vector<AbiCall> calls(kThreads);
  std::vector<std::thread> threads;
  for (int i = 0; i < kThreads; ++i) {
    threads.emplace_back([&, i] { calls[i] = Attend(client_.get(), in, {}); });
  }
  for (std::thread& t : threads) t.join();
  for (const AbiCall& call : calls) {
    EXPECT_EQ(call.code, 0) << call.error;
    EXPECT_EQ(call.out, first.out);
  }
}

TEST_F(ClientCApiTest, HealthInfoKernelsAndStats) {
  int status = -1;
  char error[256];
  ASSERT_EQ(attn_client_health(client_.get(), nullptr, &status, error, sizeof(error)), 0) << error;
  EXPECT_EQ(status, 1);  // SERVING
  ASSERT_EQ(attn_client_health(client_.get(), "no.such.Service", &status, error, sizeof(error)),
            0)
      << error;
  EXPECT_EQ(status, 3);  // SERVICE_UNKNOWN

  attn_client_buffer_t message{};
  ASSERT_EQ(attn_client_server_info(client_.get(), &message, error, sizeof(error)), 0) << error;
  attnserve::v1::ServerInfo info;
  ASSERT_TRUE(info.ParseFromArray(message.data, static_cast<int>(message.size)));
  attn_client_buffer_free(&message);
  EXPECT_EQ(message.data, nullptr);
  EXPECT_EQ(info.backend(), "cpu");
  EXPECT_EQ(info.limits().max_message_bytes(), attn::testing::kBreadthMaxMessageBytes);

  ASSERT_EQ(attn_client_list_kernels(client_.get(), &message, error, sizeof(error)), 0) << error;
  attnserve::v1::ListKernelsResponse kernels;
  ASSERT_TRUE(kernels.ParseFromArray(message.data, static_cast<int>(message.size)));
  attn_client_buffer_free(&message);
  bool has_cpu_reference = false;
  for (const auto& kernel : kernels.kernels()) has_cpu_reference |= kernel.name() == "cpu_reference";
  EXPECT_TRUE(has_cpu_reference) << kernels.ShortDebugString();

  ASSERT_EQ(attn_client_stats(client_.get(), &message, error, sizeof(error)), 0) << error;
  attnserve::v1::ServerStats stats;
  ASSERT_TRUE(stats.ParseFromArray(message.data, static_cast<int>(message.size)));
  attn_client_buffer_free(&message);
  EXPECT_GT(stats.ByteSizeLong(), 0u);
}

}  // namespace
}  // namespace attn
