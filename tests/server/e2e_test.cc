// End-to-end tests of attn_server on one backend: the built binary runs on a
// loopback port (ServerProcess) and is called through the generated stub.
// Compiled twice: ATTN_E2E_BACKEND "cpu" (label cpu, runs in CI) and "cuda"
// (label gpu; skips with a message when no CUDA device is visible).
#include <cmath>
#include <cstdlib>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/synchronization/notification.h"
#include "absl/time/clock.h"
#include "attn/attention.h"
#include "attn/device.h"
#include "attnserve_compat/v1/attention.pb.h"
#include "e2e_util.h"
#include "google/protobuf/descriptor.h"
#include "google/protobuf/message.h"
#include "grpcpp/client_context.h"
#include "grpcpp/generic/generic_stub.h"
#include "grpcpp/support/byte_buffer.h"
#include "gtest/gtest.h"
#include "server_process.h"
#include "test_util.h"

#ifndef ATTN_E2E_BACKEND
#error "ATTN_E2E_BACKEND must be \"cpu\" or \"cuda\""
#endif

namespace attn::testing {
namespace {

namespace pb = ::attnserve::v1;

constexpr std::string_view kBackend = ATTN_E2E_BACKEND;
constexpr bool kCuda = kBackend == "cuda";

// Relative L2 error allowed against float64; plumbing mistakes (swapped
// tensors, wrong offsets, stale data) give errors of order 1.
double Tolerance(DType dtype) { return dtype == DType::kBFloat16 ? 1e-2 : 5e-3; }

double DefaultScale(const Shape& shape) {
  return 1.0 / std::sqrt(static_cast<double>(shape.head_dim));
}

// The backend's flags, then those of ATTN_E2E_SERVER_FLAGS (split on
// spaces), so the same checks can run against a server tuned otherwise
// (e.g. "--streaming_staging --completion_threads=8").
std::vector<std::string> BackendFlags() {
  std::vector<std::string> flags =
      kCuda ? std::vector<std::string>{"--backend=cuda", "--streams_per_device=2",
                                       "--stream_chunk_bytes=65536"}
            : std::vector<std::string>{"--backend=cpu", "--cpu_threads=2",
                                       "--max_tokens_per_request=4194304",
                                       "--stream_chunk_bytes=65536"};
  if (const char* extra = std::getenv("ATTN_E2E_SERVER_FLAGS"); extra != nullptr) {
    for (absl::string_view flag : absl::StrSplit(extra, ' ', absl::SkipEmpty())) {
      flags.emplace_back(flag);
    }
  }
  return flags;
}

template <typename... Extra>
std::vector<std::string> FlagsWith(Extra... extra) {
  std::vector<std::string> flags = BackendFlags();
  (flags.push_back(extra), ...);
  return flags;
}

std::string SkipReason() {
  if (kCuda && ListCudaDevices().empty()) {
    return "no CUDA device visible: the cuda backend's end-to-end tests need one";
  }
  return "";
}

// A unary call with a deadline.
grpc::Status Call(Stub& stub, const pb::AttendRequest& request, pb::AttendResponse* response,
                  absl::Duration timeout = absl::Seconds(120)) {
  auto context = ContextWithDeadline(timeout);
  return stub.Attend(context.get(), request, response);
}

pb::ServerStats GetStats(Stub& stub) {
  pb::ServerStats stats;
  auto context = ContextWithDeadline(absl::Seconds(10));
  EXPECT_TRUE(stub.GetStats(context.get(), pb::GetStatsRequest(), &stats).ok());
  return stats;
}

// A unary call running in the background.
struct AsyncAttend {
  grpc::ClientContext context;
  pb::AttendRequest request;
  pb::AttendResponse response;
  grpc::Status status;
  absl::Notification done;
  absl::Time deadline;

  void Start(Stub& stub, absl::Duration timeout) {
    deadline = absl::Now() + timeout;
    context.set_deadline(absl::ToChronoTime(deadline));
    stub.async()->Attend(&context, &request, &response, [this](grpc::Status s) {
      status = std::move(s);
      done.Notify();
    });
  }
  // Waits for the call to end, which it does by its deadline at the latest
  // (however slow the machine makes the kernel); false if it outlives that.
  bool Wait() { return done.WaitForNotificationWithDeadline(deadline + absl::Seconds(30)); }
};

// Polls GetStats until `predicate` holds (true) or 30 s pass (false).
template <typename Predicate>
bool WaitForStats(Stub& stub, Predicate predicate) {
  const absl::Time deadline = absl::Now() + absl::Seconds(30);
  while (absl::Now() < deadline) {
    if (predicate(GetStats(stub))) return true;
    absl::SleepFor(absl::Milliseconds(2));
  }
  return false;
}

class E2eTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    skip_ = new std::string(SkipReason());
    if (!skip_->empty()) return;
    auto server = ServerProcess::Start(BackendFlags());
    if (!server.ok()) {
      start_error_ = new std::string(server.status().ToString());
      return;
    }
    server_ = server->release();
    stub_ = pb::Attention::NewStub(server_->NewChannel()).release();
    auto context = ContextWithDeadline(absl::Seconds(10));
    kernels_ = new pb::ListKernelsResponse();
    if (!stub_->ListKernels(context.get(), pb::ListKernelsRequest(), kernels_).ok()) return;
    for (const pb::KernelDescriptor& kernel : kernels_->kernels()) {
      if (kernel.is_default()) default_kernel_ = new std::string(kernel.name());
      seq_unit_ = std::max<int64_t>(seq_unit_, kernel.seq_multiple());
    }
    if (kCuda) seq_unit_ = std::max<int64_t>(seq_unit_, 64);
  }

  static void TearDownTestSuite() {
    delete stub_;
    stub_ = nullptr;
    if (server_ != nullptr) {
      auto exit = server_->Stop();
      EXPECT_TRUE(exit.ok() && exit->Clean())
          << "server exit: " << (exit.ok() ? exit->ToString() : exit.status().ToString());
      delete server_;
      server_ = nullptr;
    }
  }

  void SetUp() override {
    if (!skip_->empty()) GTEST_SKIP() << *skip_;
    ASSERT_NE(server_, nullptr) << (start_error_ ? *start_error_ : "no server");
    ASSERT_NE(default_kernel_, nullptr) << "ListKernels marked no default kernel";
  }

  // A shape every kernel of the backend accepts.
  static Shape SmallShape(int64_t batch = 1, int64_t seq_units = 1, int64_t heads = 2) {
    if (kCuda) return {batch, seq_units * seq_unit_, heads, 128};
    return {batch, 16 * seq_units, heads, 64};
  }

  // A valid small request, and a check that the server still answers it.
  static pb::AttendRequest GoodRequest(const std::string& id) {
    return MakeRequest(MakeRandomInputs(SmallShape(), DType::kBFloat16, FreshSeed()), id);
  }
  static void ExpectServerStillServes(const std::string& after) {
    pb::AttendResponse response;
    grpc::Status status = Call(*stub_, GoodRequest("good-after-" + after), &response);
    EXPECT_TRUE(status.ok()) << "a good request after '" << after
                             << "' failed: " << status.error_message();
  }

  static std::string* skip_;
  static std::string* start_error_;
  static ServerProcess* server_;
  static Stub* stub_;
  static pb::ListKernelsResponse* kernels_;
  static std::string* default_kernel_;
  static int64_t seq_unit_;
};

std::string* E2eTest::skip_ = nullptr;
std::string* E2eTest::start_error_ = nullptr;
ServerProcess* E2eTest::server_ = nullptr;
Stub* E2eTest::stub_ = nullptr;
pb::ListKernelsResponse* E2eTest::kernels_ = nullptr;
std::string* E2eTest::default_kernel_ = nullptr;
int64_t E2eTest::seq_unit_ = 1;

TEST_F(E2eTest, AttendMatchesFloat64Reference) {
  std::vector<Shape> shapes;
  if (kCuda) {
    shapes = {SmallShape(2, 2, 4), SmallShape(1, 4, 1), SmallShape(3, 1, 3)};
  } else {
    shapes = {{2, 37, 3, 64}, {1, 128, 2, 128}, {1, 1, 1, 8}, {2, 5, 1, 512}};
  }
  for (const Shape& shape : shapes) {
    for (DType dtype : {DType::kBFloat16, DType::kFloat16}) {
      const HostInputs in = MakeRandomInputs(shape, dtype, FreshSeed());
      SCOPED_TRACE(Describe(in));
      const std::string id = absl::StrCat("correct-", DTypeName(dtype), "-", shape.seq_len);
      pb::AttendResponse response;
      grpc::Status status = Call(*stub_, MakeRequest(in, id), &response);
      ASSERT_TRUE(status.ok()) << status.error_message();
      EXPECT_TRUE(
          OutputMatchesReference(in, DefaultScale(shape), response.out(), Tolerance(dtype)));
      EXPECT_TRUE(TimingConsistent(response.timing()));
      EXPECT_EQ(response.request_id(), id);
      EXPECT_EQ(response.kernel(), *default_kernel_);
      EXPECT_EQ(response.backend(), kBackend);
      EXPECT_FALSE(response.device().empty());
      EXPECT_GT(response.kernel_tflops(), 0.0);
      EXPECT_EQ(response.shape().seq_len(), shape.seq_len);
      EXPECT_EQ(response.dtype(),
                dtype == DType::kBFloat16 ? pb::DTYPE_BFLOAT16 : pb::DTYPE_FLOAT16);
      EXPECT_EQ(response.timing().receive_ns(), 0) << "unary calls have no upload phase";
      if (kCuda) {
        EXPECT_GT(response.timing().h2d_ns(), 0);
        EXPECT_GT(response.timing().d2h_ns(), 0);
      } else {
        EXPECT_EQ(response.timing().h2d_ns(), 0);
        EXPECT_EQ(response.timing().d2h_ns(), 0);
      }
    }
  }
}

TEST_F(E2eTest, ExplicitSoftmaxScaleAndServerMadeRequestId) {
  const HostInputs in = MakeRandomInputs(SmallShape(1, 2, 2), DType::kFloat16, FreshSeed());
  pb::AttendResponse response;
  grpc::Status status = Call(*stub_, MakeRequest(in, "", "", 0.05f), &response);
  ASSERT_TRUE(status.ok()) << status.error_message();
  EXPECT_TRUE(OutputMatchesReference(in, 0.05f, response.out(), Tolerance(in.dtype)));
  EXPECT_FALSE(response.request_id().empty()) << "the server names requests that have no id";
}

TEST_F(E2eTest, EveryListedKernelRunsByName) {
  for (const pb::KernelDescriptor& kernel : kernels_->kernels()) {
    SCOPED_TRACE(kernel.name());
    const int64_t multiple = std::max(1, kernel.seq_multiple());
    const Shape shape{2, 2 * multiple, 2, kernel.head_dim() > 0 ? kernel.head_dim() : 64};
    const HostInputs in = MakeRandomInputs(shape, DType::kBFloat16, FreshSeed());
    pb::AttendResponse response;
    grpc::Status status = Call(*stub_, MakeRequest(in, "by-name", kernel.name()), &response);
    ASSERT_TRUE(status.ok()) << status.error_message();
    EXPECT_EQ(response.kernel(), kernel.name());
    EXPECT_TRUE(
        OutputMatchesReference(in, DefaultScale(shape), response.out(), Tolerance(in.dtype)));
  }
}

TEST_F(E2eTest, StreamGivesTheSameOutputAsUnary) {
  const Shape shape = kCuda ? SmallShape(2, 2, 2) : Shape{2, 80, 4, 64};
  for (DType dtype : {DType::kBFloat16, DType::kFloat16}) {
    const HostInputs in = MakeRandomInputs(shape, dtype, FreshSeed());
    SCOPED_TRACE(Describe(in));
    const pb::AttendRequest request = MakeRequest(in, "stream-vs-unary");
    pb::AttendResponse unary;
    grpc::Status status = Call(*stub_, request, &unary);
    ASSERT_TRUE(status.ok()) << status.error_message();
    // Odd chunk sizes: chunks straddle elements and rows.
    for (int64_t chunk_bytes : {int64_t{3001}, int64_t{1} << 20}) {
      SCOPED_TRACE(absl::StrCat("chunk_bytes=", chunk_bytes));
      StreamResult streamed = AttendViaStream(*stub_, request, chunk_bytes);
      ASSERT_TRUE(streamed.status.ok()) << streamed.status.error_message();
      EXPECT_EQ(streamed.error, "");
      EXPECT_TRUE(streamed.out == unary.out()) << "stream and unary outputs differ";
      EXPECT_GE(streamed.chunks, 2) << "output larger than --stream_chunk_bytes comes in chunks";
      EXPECT_EQ(streamed.header.request_id(), "stream-vs-unary");
      EXPECT_EQ(streamed.header.kernel(), unary.kernel());
      EXPECT_EQ(streamed.header.backend(), unary.backend());
      EXPECT_EQ(streamed.header.shape().SerializeAsString(), unary.shape().SerializeAsString());
      EXPECT_TRUE(streamed.header.out().empty());
      EXPECT_TRUE(TimingConsistent(streamed.header.timing()));
      EXPECT_TRUE(OutputMatchesReference(in, DefaultScale(shape), streamed.out, Tolerance(dtype)));
    }
  }
}

struct BadCase {
  std::string name;
  std::function<void(pb::AttendRequest&)> mutate;
  grpc::StatusCode code;
  std::string message_part;
};

TEST_F(E2eTest, EveryBadRequestGetsItsStatusAndTheServerKeepsServing) {
  const Shape good = SmallShape();
  const int64_t bytes = good.NumElements() * 2;
  const std::string shape_text = good.ToString();
  std::vector<BadCase> cases = {
      {"unspecified dtype", [](pb::AttendRequest& r) { r.set_dtype(pb::DTYPE_UNSPECIFIED); },
       grpc::StatusCode::INVALID_ARGUMENT, "dtype is DTYPE_UNSPECIFIED"},
      {"unknown dtype", [](pb::AttendRequest& r) { r.set_dtype(static_cast<pb::DType>(9)); },
       grpc::StatusCode::INVALID_ARGUMENT, "dtype is 9"},
      {"missing shape", [](pb::AttendRequest& r) { r.clear_shape(); },
       grpc::StatusCode::INVALID_ARGUMENT, "shape is missing"},
      {"zero batch", [](pb::AttendRequest& r) { r.mutable_shape()->set_batch(0); },
       grpc::StatusCode::INVALID_ARGUMENT, "batch is 0; it must be between 1 and"},
      {"zero seq_len", [](pb::AttendRequest& r) { r.mutable_shape()->set_seq_len(0); },
       grpc::StatusCode::INVALID_ARGUMENT, "seqlen_q is 0; it must be between 1 and"},
      {"negative heads", [](pb::AttendRequest& r) { r.mutable_shape()->set_num_heads(-2); },
       grpc::StatusCode::INVALID_ARGUMENT, "heads_q is -2"},
      {"huge head_dim",
       [](pb::AttendRequest& r) { r.mutable_shape()->set_head_dim(int64_t{1} << 40); },
       grpc::StatusCode::INVALID_ARGUMENT,
       "head_dim is 1099511627776; it must be between 1 and 2147483648 (head_dim is "
       "shape.head_dim)"},
      {"huge seq_len",
       [](pb::AttendRequest& r) { r.mutable_shape()->set_seq_len(int64_t{1} << 30); },
       grpc::StatusCode::RESOURCE_EXHAUSTED, "(--max_tokens_per_request)"},
      {"unsupported head_dim",
       [](pb::AttendRequest& r) { r.mutable_shape()->set_head_dim(kCuda ? 100 : 1024); },
       grpc::StatusCode::INVALID_ARGUMENT,
       absl::StrCat("head_dim is ", kCuda ? 100 : 1024, "; kernel '", *default_kernel_, "'")},
      {"short q", [](pb::AttendRequest& r) { r.mutable_q()->resize(r.q().size() - 2); },
       grpc::StatusCode::INVALID_ARGUMENT,
       absl::StrCat("q has ", bytes - 2, " bytes; shape ", shape_text, " in bf16 needs ", bytes)},
      {"long k", [](pb::AttendRequest& r) { r.mutable_k()->append("xx"); },
       grpc::StatusCode::INVALID_ARGUMENT, absl::StrCat("k has ", bytes + 2, " bytes")},
      {"missing v", [](pb::AttendRequest& r) { r.clear_v(); }, grpc::StatusCode::INVALID_ARGUMENT,
       absl::StrCat("v is empty; shape ", shape_text, " in bf16 needs ", bytes, " bytes")},
      {"missing tensors",
       [](pb::AttendRequest& r) {
         r.clear_q();
         r.clear_k();
         r.clear_v();
       },
       grpc::StatusCode::INVALID_ARGUMENT, "q is empty"},
      {"shape/bytes mismatch", [](pb::AttendRequest& r) { r.mutable_shape()->set_batch(2); },
       grpc::StatusCode::INVALID_ARGUMENT, absl::StrCat("q has ", bytes, " bytes")},
      {"unknown kernel", [](pb::AttendRequest& r) { r.set_kernel("k99_imaginary"); },
       grpc::StatusCode::NOT_FOUND, "kernel 'k99_imaginary' is unknown"},
      {"zero softmax_scale", [](pb::AttendRequest& r) { r.set_softmax_scale(0.0f); },
       grpc::StatusCode::INVALID_ARGUMENT, "softmax_scale is 0; it must be finite and > 0"},
      {"negative softmax_scale", [](pb::AttendRequest& r) { r.set_softmax_scale(-1.0f); },
       grpc::StatusCode::INVALID_ARGUMENT, "softmax_scale is -1"},
      {"NaN softmax_scale", [](pb::AttendRequest& r) { r.set_softmax_scale(std::nanf("")); },
       grpc::StatusCode::INVALID_ARGUMENT, "softmax_scale is nan"},
      {"infinite softmax_scale", [](pb::AttendRequest& r) { r.set_softmax_scale(INFINITY); },
       grpc::StatusCode::INVALID_ARGUMENT, "softmax_scale is inf"},
      {"long request_id", [](pb::AttendRequest& r) { r.set_request_id(std::string(300, 'x')); },
       grpc::StatusCode::INVALID_ARGUMENT, "request_id has 300 bytes; the limit is 128"},
      // The breadth fields.
      {"heads not a multiple of kv heads",
       [](pb::AttendRequest& r) { r.mutable_shape()->set_kv_num_heads(3); },
       grpc::StatusCode::INVALID_ARGUMENT,
       absl::StrCat("heads_q (", good.num_heads, ") must be a multiple of heads_kv (3)")},
      {"k sized for another kv_seq_len",
       [&](pb::AttendRequest& r) { r.mutable_shape()->set_kv_seq_len(good.seq_len / 2); },
       grpc::StatusCode::INVALID_ARGUMENT,
       absl::StrCat("k has ", bytes, " bytes; shape [1, ", good.seq_len / 2, ", ",
                    good.num_heads, ", ", good.head_dim, "] in bf16 needs ", bytes / 2)},
      {"window below -1", [](pb::AttendRequest& r) { r.set_window_left(-2); },
       grpc::StatusCode::INVALID_ARGUMENT, "window_left is -2; it must be >= -1"},
      {"only cu_seqlens_q",
       [&](pb::AttendRequest& r) {
         r.add_cu_seqlens_q(0);
         r.add_cu_seqlens_q(static_cast<int32_t>(good.seq_len));
       },
       grpc::StatusCode::INVALID_ARGUMENT, "cu_seqlens_k is empty but cu_seqlens_q has 2 offsets"},
      {"only cu_seqlens_k",
       [&](pb::AttendRequest& r) {
         r.add_cu_seqlens_k(0);
         r.add_cu_seqlens_k(static_cast<int32_t>(good.seq_len));
       },
       grpc::StatusCode::INVALID_ARGUMENT, "cu_seqlens_q is empty but cu_seqlens_k has 2 offsets"},
      {"cu_seqlens not increasing",
       [&](pb::AttendRequest& r) {
         const int32_t s = static_cast<int32_t>(good.seq_len);
         r.mutable_shape()->set_batch(0);
         for (int32_t offset : {0, s / 2 + 1, s / 2 - 1, s}) r.add_cu_seqlens_q(offset);
         for (int32_t offset : {0, s / 4, s / 2, s}) r.add_cu_seqlens_k(offset);
       },
       grpc::StatusCode::INVALID_ARGUMENT,
       absl::StrCat("cu_seqlens_q[2] (", good.seq_len / 2 - 1,
                    ") is less than cu_seqlens_q[1]")},
      {"cu_seqlens not ending at the token count",
       [&](pb::AttendRequest& r) {
         r.add_cu_seqlens_q(0);
         r.add_cu_seqlens_q(static_cast<int32_t>(good.seq_len - 4));
         r.add_cu_seqlens_k(0);
         r.add_cu_seqlens_k(static_cast<int32_t>(good.seq_len));
       },
       grpc::StatusCode::INVALID_ARGUMENT,
       absl::StrCat("q has ", bytes, " bytes; shape [", good.seq_len - 4, ", ", good.num_heads,
                    ", ", good.head_dim, "] packed by cu_seqlens_q in bf16 needs ",
                    bytes / good.seq_len * (good.seq_len - 4))},
      {"cu_seqlens of different sizes",
       [&](pb::AttendRequest& r) {
         const int32_t s = static_cast<int32_t>(good.seq_len);
         for (int32_t offset : {0, s}) r.add_cu_seqlens_q(offset);
         for (int32_t offset : {0, s / 2, s}) r.add_cu_seqlens_k(offset);
       },
       grpc::StatusCode::INVALID_ARGUMENT, "cu_seqlens_q has 2 offsets and cu_seqlens_k 3"},
      {"cu_seqlens with another batch",
       [&](pb::AttendRequest& r) {
         r.mutable_shape()->set_batch(2);
         for (int32_t offset : {0, static_cast<int32_t>(good.seq_len)}) {
           r.add_cu_seqlens_q(offset);
           r.add_cu_seqlens_k(offset);
         }
       },
       grpc::StatusCode::INVALID_ARGUMENT, "shape.batch is 2 but cu_seqlens_q has 2 offsets"},
  };
  if (kCuda) {
    // A ladder kernel (the seed's constraints) refuses what it cannot do.
    std::string ladder;
    for (const pb::KernelDescriptor& kernel : kernels_->kernels()) {
      if (kernel.seq_multiple() > 1 && !kernel.window()) ladder = kernel.name();
    }
    if (!ladder.empty()) {
      cases.push_back({"seq_len off the block size",
                       [=](pb::AttendRequest& r) {
                         r.set_kernel(ladder);
                         r.mutable_shape()->set_seq_len(seq_unit_ + 1);
                       },
                       grpc::StatusCode::INVALID_ARGUMENT,
                       absl::StrCat("seqlen_q is ", seq_unit_ + 1, "; kernel '", ladder,
                                    "' needs a multiple of")});
      cases.push_back({"window on a ladder kernel",
                       [=](pb::AttendRequest& r) {
                         r.set_kernel(ladder);
                         r.set_window_left(16);
                       },
                       grpc::StatusCode::INVALID_ARGUMENT,
                       absl::StrCat("window_left is 16; kernel '", ladder,
                                    "' has no sliding window")});
    }
    cases.push_back({"CPU kernel on the cuda backend",
                     [](pb::AttendRequest& r) { r.set_kernel("cpu_reference"); },
                     grpc::StatusCode::FAILED_PRECONDITION, "this server runs the cuda backend"});
  } else if (BuiltWithCuda()) {
    cases.push_back({"GPU kernel on the cpu backend",
                     [](pb::AttendRequest& r) { r.set_kernel("k01_base"); },
                     grpc::StatusCode::FAILED_PRECONDITION, "this server runs the cpu backend"});
  }
  for (const BadCase& bad : cases) {
    SCOPED_TRACE(bad.name);
    pb::AttendRequest request = GoodRequest("bad-" + bad.name);
    bad.mutate(request);
    pb::AttendResponse response;
    grpc::Status status = Call(*stub_, request, &response, absl::Seconds(30));
    EXPECT_EQ(status.error_code(), bad.code) << status.error_message();
    EXPECT_NE(status.error_message().find(bad.message_part), std::string::npos)
        << "message: " << status.error_message() << "\nexpected to contain: " << bad.message_part;
    ExpectServerStillServes(bad.name);
  }
}

TEST_F(E2eTest, EveryBadStreamGetsItsStatusAndTheServerKeepsServing) {
  const pb::AttendRequest request = GoodRequest("bad-stream");
  const std::string& q = request.q();
  const int64_t bytes = static_cast<int64_t>(q.size());
  const std::string half = q.substr(0, bytes / 2);
  auto all = [&](std::vector<pb::AttendStreamRequest> prefix) {
    prefix.push_back(Chunk(pb::TENSOR_Q, 0, request.q()));
    prefix.push_back(Chunk(pb::TENSOR_K, 0, request.k()));
    prefix.push_back(Chunk(pb::TENSOR_V, 0, request.v()));
    return prefix;
  };
  pb::AttendStreamRequest header_with_q = HeaderOf(request);
  header_with_q.mutable_header()->set_q(q);
  pb::AttendRequest kv_half = request;  // K and V of half the tokens
  kv_half.mutable_shape()->set_kv_seq_len(request.shape().seq_len() / 2);
  pb::AttendStreamRequest bad_header = HeaderOf(request);
  bad_header.mutable_header()->set_dtype(pb::DTYPE_UNSPECIFIED);

  struct StreamCase {
    std::string name;
    std::vector<pb::AttendStreamRequest> messages;
    grpc::StatusCode code;
    std::string message_part;
  };
  const std::vector<StreamCase> cases = {
      {"no messages", {}, grpc::StatusCode::INVALID_ARGUMENT, "ended before its header"},
      {"chunk first",
       {Chunk(pb::TENSOR_Q, 0, half)},
       grpc::StatusCode::INVALID_ARGUMENT,
       "first AttendStream message must be a header"},
      {"bad header",
       {bad_header},
       grpc::StatusCode::INVALID_ARGUMENT,
       "dtype is DTYPE_UNSPECIFIED"},
      {"tensor inside the header",
       {header_with_q},
       grpc::StatusCode::INVALID_ARGUMENT,
       absl::StrCat("header.q has ", bytes, " bytes")},
      {"second header", all({HeaderOf(request), HeaderOf(request)}),
       grpc::StatusCode::INVALID_ARGUMENT, "second header"},
      {"out-of-order chunk",
       {HeaderOf(request), Chunk(pb::TENSOR_K, bytes / 2, half)},
       grpc::StatusCode::INVALID_ARGUMENT,
       absl::StrCat("chunk.offset is ", bytes / 2, " for k; expected 0")},
      {"repeated chunk",
       {HeaderOf(request), Chunk(pb::TENSOR_Q, 0, half), Chunk(pb::TENSOR_Q, 0, half)},
       grpc::StatusCode::INVALID_ARGUMENT,
       absl::StrCat("chunk.offset is 0 for q; expected ", half.size())},
      {"chunk past the end",
       {HeaderOf(request), Chunk(pb::TENSOR_V, 0, q + "xx")},
       grpc::StatusCode::INVALID_ARGUMENT,
       absl::StrCat("chunk of v at offset 0 has ", bytes + 2, " bytes, past the end of v")},
      {"output chunk in a request",
       {HeaderOf(request), Chunk(pb::TENSOR_OUT, 0, half)},
       grpc::StatusCode::INVALID_ARGUMENT,
       "chunk.tensor is TENSOR_OUT"},
      {"LSE chunk in a request",
       {HeaderOf(request), Chunk(pb::TENSOR_LSE, 0, half)},
       grpc::StatusCode::INVALID_ARGUMENT,
       "chunk.tensor is TENSOR_LSE"},
      {"k past its own size",
       {HeaderOf(kv_half), Chunk(pb::TENSOR_K, 0, q)},
       grpc::StatusCode::INVALID_ARGUMENT,
       absl::StrCat("chunk of k at offset 0 has ", bytes, " bytes, past the end of k")},
      {"unnamed chunk",
       {HeaderOf(request), Chunk(pb::TENSOR_UNSPECIFIED, 0, half)},
       grpc::StatusCode::INVALID_ARGUMENT,
       "chunk.tensor is TENSOR_UNSPECIFIED"},
      {"missing v",
       {HeaderOf(request), Chunk(pb::TENSOR_Q, 0, request.q()),
        Chunk(pb::TENSOR_K, 0, request.k())},
       grpc::StatusCode::INVALID_ARGUMENT,
       absl::StrCat("AttendStream ended with 0 of the ", bytes, " bytes of v")},
      {"truncated q",
       {HeaderOf(request), Chunk(pb::TENSOR_Q, 0, half), Chunk(pb::TENSOR_K, 0, request.k()),
        Chunk(pb::TENSOR_V, 0, request.v())},
       grpc::StatusCode::INVALID_ARGUMENT,
       absl::StrCat("ended with ", half.size(), " of the ", bytes, " bytes of q")},
  };
  for (const StreamCase& bad : cases) {
    SCOPED_TRACE(bad.name);
    grpc::Status status = SendRawStream(*stub_, bad.messages);
    EXPECT_EQ(status.error_code(), bad.code) << status.error_message();
    EXPECT_NE(status.error_message().find(bad.message_part), std::string::npos)
        << "message: " << status.error_message() << "\nexpected to contain: " << bad.message_part;
    StreamResult good = AttendViaStream(*stub_, request, 1000);
    EXPECT_TRUE(good.status.ok()) << "a good stream after '" << bad.name
                                  << "' failed: " << good.status.error_message();
  }
  // The well-formed sequence itself succeeds.
  EXPECT_TRUE(SendRawStream(*stub_, all({HeaderOf(request)})).ok());
}

TEST_F(E2eTest, ListKernelsAndServerInfoDescribeTheBackend) {
  ASSERT_GT(kernels_->kernels_size(), 0);
  int defaults = 0;
  for (const pb::KernelDescriptor& kernel : kernels_->kernels()) {
    EXPECT_EQ(kernel.backend(), kBackend) << kernel.name();
    EXPECT_GE(kernel.seq_multiple(), 1) << kernel.name();
    EXPECT_FALSE(kernel.description().empty()) << kernel.name();
    defaults += kernel.is_default() ? 1 : 0;
  }
  EXPECT_EQ(defaults, 1);
  if (!kCuda) {
    ASSERT_EQ(kernels_->kernels_size(), 2);
    EXPECT_EQ(kernels_->kernels(0).name(), kCpuKernelName);
    EXPECT_EQ(kernels_->kernels(1).name(), kCpuFlashKernelName);
    EXPECT_EQ(kernels_->kernels(0).max_head_dim(), kMaxCpuHeadDim);
    EXPECT_EQ(kernels_->kernels(1).max_head_dim(), kMaxCpuHeadDim);
  }

  pb::ServerInfo info;
  auto context = ContextWithDeadline(absl::Seconds(10));
  ASSERT_TRUE(stub_->GetServerInfo(context.get(), pb::GetServerInfoRequest(), &info).ok());
  EXPECT_EQ(info.backend(), kBackend);
  EXPECT_FALSE(info.version().empty());
  EXPECT_NE(info.build().find("gRPC"), std::string::npos) << info.build();
  EXPECT_EQ(info.default_kernel(), *default_kernel_);
  EXPECT_EQ(info.dtypes_size(), 2);
  EXPECT_EQ(info.devices_size() > 0, kCuda);
  EXPECT_GT(info.limits().max_message_bytes(), 0);
  EXPECT_EQ(info.limits().max_request_bytes(), 3 * 2 * info.limits().max_tokens_per_request());
  EXPECT_EQ(info.limits().queue_capacity(), 64);
  EXPECT_EQ(info.limits().stream_chunk_bytes(), 65536);
  EXPECT_GE(info.limits().workers(), 1);
  if (!kCuda) {
    EXPECT_EQ(info.limits().max_tokens_per_request(), 4194304);
  }
}

TEST_F(E2eTest, StatsCountRequestsAndTime) {
  const pb::ServerStats before = GetStats(*stub_);
  pb::AttendResponse response;
  const pb::AttendRequest good = GoodRequest("stats-good");
  ASSERT_TRUE(Call(*stub_, good, &response).ok());
  pb::AttendRequest bad = good;
  bad.clear_v();
  EXPECT_FALSE(Call(*stub_, bad, &response).ok());
  const pb::ServerStats after = GetStats(*stub_);
  EXPECT_EQ(after.requests_ok() - before.requests_ok(), 1);
  EXPECT_EQ(after.requests_failed() - before.requests_failed(), 1);
  EXPECT_EQ(after.bytes_in() - before.bytes_in(), 3 * static_cast<int64_t>(good.q().size()));
  EXPECT_EQ(after.bytes_out() - before.bytes_out(), static_cast<int64_t>(good.q().size()));
  EXPECT_GT(after.cumulative().kernel_ns(), before.cumulative().kernel_ns());
  EXPECT_GT(after.cumulative().total_ns(), before.cumulative().total_ns());
  EXPECT_GT(after.uptime_ns(), before.uptime_ns());
  EXPECT_EQ(after.in_flight(), 0);
  EXPECT_EQ(after.queued(), 0);
}

// The reference request: B=4, S=4096, H=16, D=128 in bf16 on the
// GPU (checked on a sample of rows against float64, every element checked
// for NaN poison), and a small stand-in on the CPU backend.
TEST_F(E2eTest, LargeRequestUnaryAndStream) {
  const Shape shape = kCuda ? Shape{4, 4096, 16, 128} : Shape{1, 256, 2, 128};
  const HostInputs in = MakeRandomInputs(shape, DType::kBFloat16, FreshSeed());
  SCOPED_TRACE(Describe(in));
  const pb::AttendRequest request = MakeRequest(in, "large");
  pb::AttendResponse unary;
  grpc::Status status = Call(*stub_, request, &unary, absl::Seconds(300));
  ASSERT_TRUE(status.ok()) << status.error_message();
  EXPECT_TRUE(OutputMatchesReference(in, DefaultScale(shape), unary.out(), Tolerance(in.dtype),
                                     kCuda ? 64 : 0));
  EXPECT_TRUE(TimingConsistent(unary.timing()));
  const pb::Timing& t = unary.timing();
  std::printf(
      "%s %s on %s, kernel %s: decode %.3f ms, queue %.3f ms, h2d %.3f ms, kernel %.3f ms, "
      "d2h %.3f ms, total %.3f ms; %.3f TFLOP/s\n",
      shape.ToString().c_str(), "bf16", unary.device().c_str(), unary.kernel().c_str(),
      t.decode_ns() / 1e6, t.queue_ns() / 1e6, t.h2d_ns() / 1e6, t.kernel_ns() / 1e6,
      t.d2h_ns() / 1e6, t.total_ns() / 1e6, unary.kernel_tflops());

  StreamResult streamed = AttendViaStream(*stub_, request, int64_t{1} << 20, absl::Seconds(300));
  ASSERT_TRUE(streamed.status.ok()) << streamed.status.error_message();
  EXPECT_EQ(streamed.error, "");
  EXPECT_TRUE(streamed.out == unary.out()) << "stream and unary outputs differ";
}

// Limits small enough to reach: a 1 MiB message cap, 64 Ki-element tensors,
// and AttendStream buffers (q, k, v and the output) for one call of half that.
TEST_F(E2eTest, MessageTokenAndStreamBufferLimits) {
  const int64_t tokens = 65536;
  const int64_t budget = 4 * 2 * (tokens / 2);
  auto server = ServerProcess::Start(FlagsWith("--max_message_bytes=1048576",
                                               absl::StrCat("--max_tokens_per_request=", tokens),
                                               absl::StrCat("--max_stream_buffer_bytes=", budget)));
  ASSERT_TRUE(server.ok()) << server.status();
  auto stub = pb::Attention::NewStub((*server)->NewChannel());

  // Oversized payload: the message is over --max_message_bytes.
  pb::AttendRequest oversized = GoodRequest("oversized");
  oversized.mutable_q()->resize(3 << 19);
  pb::AttendResponse response;
  grpc::Status status = Call(*stub, oversized, &response);
  EXPECT_EQ(status.error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED) << status.error_message();

  // A shape over --max_tokens_per_request, unary and streamed.
  pb::AttendRequest too_many = GoodRequest("too-many-tokens");
  // tokens x (H*D) elements; a long sequence rather than a large batch, which
  // GPU kernels would refuse first (batch is a grid dimension, at most 65535).
  too_many.mutable_shape()->set_seq_len(tokens);
  status = Call(*stub, too_many, &response);
  EXPECT_EQ(status.error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED);
  EXPECT_NE(status.error_message().find(
                absl::StrCat("this server's limit is ", tokens, " (--max_tokens_per_request)")),
            std::string::npos)
      << status.error_message();
  status = SendRawStream(*stub, {HeaderOf(too_many)});
  EXPECT_EQ(status.error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED) << status.error_message();

  // A stream of half the largest size holds the whole buffer budget, so a
  // second stream is refused until the first one ends. The holder has the
  // budget once a probe of the largest size (refused either way: it alone
  // needs twice the budget) says all of it is held. A probe that fitted could
  // take the budget before the holder's header got there, and refuse it.
  const Shape largest = kCuda ? Shape{1, tokens / 256, 2, 128} : Shape{1, tokens / 128, 2, 64};
  const Shape half{largest.batch, largest.seq_len / 2, largest.num_heads, largest.head_dim};
  const HostInputs in = MakeRandomInputs(half, DType::kBFloat16, FreshSeed());
  const pb::AttendRequest big = MakeRequest(in, "budget-holder");
  auto holder_context = ContextWithDeadline(absl::Seconds(120));
  auto holder = stub->AttendStream(holder_context.get());
  ASSERT_TRUE(holder->Write(HeaderOf(big)));
  pb::AttendRequest probe = big;
  probe.set_request_id("budget-probe");
  probe.mutable_shape()->set_seq_len(largest.seq_len);
  const std::string all_held = absl::StrCat(budget, " of ", budget, " are held");
  bool held = false;
  const absl::Time give_up = absl::Now() + absl::Seconds(30);
  while (!held && absl::Now() < give_up) {  // until the holder's header got there
    status = SendRawStream(*stub, {HeaderOf(probe)});
    held = status.error_message().find(all_held) != std::string::npos;
    if (!held) absl::SleepFor(absl::Milliseconds(10));
  }
  ASSERT_TRUE(held) << "the holder never got the budget; last probe: " << status.error_message();
  status = SendRawStream(*stub, {HeaderOf(GoodRequest("second-stream"))});
  EXPECT_EQ(status.error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED) << status.error_message();
  EXPECT_NE(status.error_message().find("--max_stream_buffer_bytes"), std::string::npos)
      << status.error_message();
  // The holder completes normally, and then streams are admitted again.
  ASSERT_TRUE(holder->Write(Chunk(pb::TENSOR_Q, 0, big.q())));
  ASSERT_TRUE(holder->Write(Chunk(pb::TENSOR_K, 0, big.k())));
  ASSERT_TRUE(holder->Write(Chunk(pb::TENSOR_V, 0, big.v())));
  ASSERT_TRUE(holder->WritesDone());
  pb::AttendStreamResponse part;
  std::string out;
  while (holder->Read(&part)) {
    if (part.has_chunk()) out.append(part.chunk().data());
  }
  status = holder->Finish();
  ASSERT_TRUE(status.ok()) << status.error_message();
  EXPECT_TRUE(OutputMatchesReference(in, DefaultScale(half), out, Tolerance(in.dtype)));
  StreamResult after = AttendViaStream(*stub, GoodRequest("after-budget"), 4096);
  EXPECT_TRUE(after.status.ok()) << after.status.error_message();
  EXPECT_TRUE(Call(*stub, GoodRequest("after-limits"), &response).ok());

  auto exit = (*server)->Stop();
  ASSERT_TRUE(exit.ok()) << exit.status();
  EXPECT_TRUE(exit->Clean()) << exit->ToString();
}

// The breadth features (issue 9), end to end: each case through Attend
// against float64, LSE included where asked for.
struct FeatureCase {
  std::string name;
  AttentionProblem problem;
  std::vector<int32_t> q_lens, k_lens;  // varlen when not empty
};

AttentionProblem Problem(int64_t batch, int64_t seqlen_q, int64_t seqlen_k, int64_t heads_q,
                         int64_t heads_kv, int64_t head_dim) {
  AttentionProblem p = AttentionProblem::SelfAttention(batch, seqlen_q, heads_q, head_dim);
  p.seqlen_k = seqlen_k;
  p.heads_kv = heads_kv;
  return p;
}

template <typename Mutate>
AttentionProblem With(AttentionProblem p, Mutate mutate) {
  mutate(p);
  return p;
}

std::vector<FeatureCase> FeatureCases() {
  auto causal = [](AttentionProblem& p) { p.causal = true; };
  auto causal_lse = [](AttentionProblem& p) { p.causal = p.return_lse = true; };
  auto lse = [](AttentionProblem& p) { p.return_lse = true; };
  return {
      {"causal", With(Problem(2, 33, 33, 2, 2, 64), causal_lse), {}, {}},
      {"Sq<Sk causal", With(Problem(2, 7, 40, 2, 2, 64), causal), {}, {}},
      {"Sq>Sk causal (rows without keys)", With(Problem(1, 40, 9, 2, 2, 64), causal_lse), {}, {}},
      {"Sk>Sq", With(Problem(1, 12, 30, 2, 2, 64), lse), {}, {}},
      {"GQA", With(Problem(2, 24, 24, 4, 2, 64), lse), {}, {}},
      {"MQA causal", With(Problem(1, 20, 20, 3, 1, 64), causal), {}, {}},
      {"window",
       With(Problem(1, 48, 48, 2, 2, 64),
            [](AttentionProblem& p) {
              p.window_left = 8;
              p.window_right = 4;
              p.return_lse = true;
            }),
       {},
       {}},
      {"window causal Sq<Sk",
       With(Problem(1, 16, 50, 2, 2, 64),
            [](AttentionProblem& p) {
              p.window_left = 10;
              p.causal = true;
            }),
       {},
       {}},
      {"head_dim 96", With(Problem(1, 19, 19, 2, 2, 96), causal), {}, {}},
      {"head_dim 256 GQA", With(Problem(1, 21, 21, 2, 1, 256), lse), {}, {}},
      {"Sq=1 decode", With(Problem(3, 1, 37, 4, 1, 128), causal_lse), {}, {}},
      {"Sq=Sk=1", Problem(1, 1, 1, 1, 1, 64), {}, {}},
      {"varlen causal GQA (empty and keyless sequences)", With(Problem(0, 0, 0, 4, 2, 64), causal_lse),
       {5, 0, 17, 3}, {9, 3, 17, 0}},
      {"varlen window",
       With(Problem(0, 0, 0, 2, 2, 64),
            [](AttentionProblem& p) {
              p.window_left = 5;
              p.window_right = 2;
            }),
       {12, 7}, {12, 20}},
      {"varlen scale", With(Problem(0, 0, 0, 1, 1, 64), [](AttentionProblem& p) {
         p.softmax_scale = 0.3f;
         p.return_lse = true;
       }),
       {3, 9}, {3, 9}},
      // Few CTAs over many keys: on CUDA split-KV through the stream's
      // workspace (the kernel splits these when it has one).
      {"Sq=1 decode, long keys", With(Problem(1, 1, 4000, 8, 2, 128), causal_lse), {}, {}},
      {"varlen decode, long keys", With(Problem(0, 0, 0, 8, 2, 128), lse), {1, 1, 2},
       {3000, 1, 700}},
  };
}

ProblemInputs FeatureInputs(const FeatureCase& c, DType dtype) {
  AttentionProblem problem = c.problem;
  std::vector<int32_t> cu_q, cu_k;
  if (!c.q_lens.empty()) SetVarlen(&problem, c.q_lens, c.k_lens, &cu_q, &cu_k);
  return MakeProblemInputs(problem, dtype, FreshSeed(), std::move(cu_q), std::move(cu_k));
}

constexpr double kLseTolerance = 1e-3;

TEST_F(E2eTest, DefaultKernelListsEveryFeature) {
  for (const pb::KernelDescriptor& kernel : kernels_->kernels()) {
    if (!kernel.is_default()) continue;
    EXPECT_TRUE(kernel.causal() && kernel.window() && kernel.gqa() &&
                kernel.kv_seq_len_differs() && kernel.lse() && kernel.varlen())
        << kernel.ShortDebugString();
    if (!kCuda) {
      EXPECT_EQ(kernel.name(), kCpuFlashKernelName);
      EXPECT_EQ(kernel.head_dims_size(), 0) << "cpu_flash takes any head_dim";
      EXPECT_EQ(kernel.head_dim(), 0);
      EXPECT_EQ(kernel.max_head_dim(), kMaxCpuHeadDim);
      EXPECT_EQ(kernel.min_compute_capability(), 0);
    } else {
      EXPECT_EQ(kernel.name(), kProductionKernelName);
      EXPECT_GE(kernel.min_compute_capability(), 80);
    }
  }
}

TEST_F(E2eTest, EveryFeatureMatchesFloat64Reference) {
  int index = 0;
  for (const FeatureCase& c : FeatureCases()) {
    const DType dtype = index++ % 2 == 0 ? DType::kBFloat16 : DType::kFloat16;
    const ProblemInputs in = FeatureInputs(c, dtype);
    const AttentionProblem& p = in.problem;
    SCOPED_TRACE(c.name + " " + Describe(in));
    pb::AttendResponse response;
    grpc::Status status = Call(*stub_, MakeRequest(in, "feature"), &response);
    ASSERT_TRUE(status.ok()) << status.error_message();
    EXPECT_TRUE(ProblemOutputMatchesReference(in, response.out(), response.lse(),
                                              Tolerance(dtype), kLseTolerance));
    EXPECT_EQ(response.kernel(), *default_kernel_);
    EXPECT_TRUE(TimingConsistent(response.timing()));
    EXPECT_GT(response.kernel_tflops(), 0.0);
    EXPECT_EQ(response.shape().batch(), p.batch);
    EXPECT_EQ(response.shape().seq_len(), p.seqlen_q);
    EXPECT_EQ(response.shape().num_heads(), p.heads_q);
    EXPECT_EQ(response.shape().head_dim(), p.head_dim);
    EXPECT_EQ(response.shape().kv_seq_len(), p.seqlen_k != p.seqlen_q ? p.seqlen_k : 0);
    EXPECT_EQ(response.shape().kv_num_heads(), p.heads_kv != p.heads_q ? p.heads_kv : 0);
  }
}

TEST_F(E2eTest, VarlenLengthsAndBatchDerivedFromCuSeqlens) {
  const FeatureCase c = FeatureCases()[12];  // varlen causal GQA
  ASSERT_FALSE(c.q_lens.empty());
  const ProblemInputs in = FeatureInputs(c, DType::kBFloat16);
  const pb::AttendRequest explicit_request = MakeRequest(in, "varlen-explicit");
  pb::AttendRequest derived = explicit_request;
  derived.set_request_id("varlen-derived");
  derived.mutable_shape()->clear_batch();
  derived.mutable_shape()->clear_seq_len();
  derived.mutable_shape()->clear_kv_seq_len();
  pb::AttendResponse a, b;
  grpc::Status status = Call(*stub_, explicit_request, &a);
  ASSERT_TRUE(status.ok()) << status.error_message();
  status = Call(*stub_, derived, &b);
  ASSERT_TRUE(status.ok()) << status.error_message();
  EXPECT_TRUE(a.out() == b.out()) << "outputs differ";
  EXPECT_TRUE(a.lse() == b.lse()) << "LSEs differ";
  EXPECT_EQ(b.shape().batch(), in.problem.batch);
  EXPECT_EQ(b.shape().seq_len(), in.problem.seqlen_q);
  EXPECT_EQ(b.shape().kv_seq_len(),
            in.problem.seqlen_k != in.problem.seqlen_q ? in.problem.seqlen_k : 0);
  EXPECT_EQ(b.shape().kv_num_heads(), in.problem.heads_kv);
}

TEST_F(E2eTest, FeaturesThroughAttendStream) {
  for (int which : {3, 12}) {  // Sk>Sq with LSE; varlen causal GQA with LSE
    const FeatureCase c = FeatureCases()[which];
    const ProblemInputs in = FeatureInputs(c, DType::kBFloat16);
    SCOPED_TRACE(c.name + " " + Describe(in));
    const pb::AttendRequest request = MakeRequest(in, "stream-feature");
    ASSERT_NE(request.q().size(), request.k().size()) << "K/V sized apart from Q";
    pb::AttendResponse unary;
    grpc::Status status = Call(*stub_, request, &unary);
    ASSERT_TRUE(status.ok()) << status.error_message();
    for (int64_t chunk_bytes : {int64_t{1001}, int64_t{1} << 20}) {
      StreamResult streamed = AttendViaStream(*stub_, request, chunk_bytes);
      ASSERT_TRUE(streamed.status.ok()) << streamed.status.error_message();
      EXPECT_EQ(streamed.error, "");
      EXPECT_TRUE(streamed.out == unary.out()) << "stream and unary outputs differ";
      EXPECT_TRUE(streamed.lse == unary.lse()) << "stream and unary LSEs differ";
      EXPECT_GE(streamed.lse_chunks, 1);
      EXPECT_TRUE(streamed.header.lse().empty());
      EXPECT_EQ(streamed.header.shape().SerializeAsString(), unary.shape().SerializeAsString());
      EXPECT_TRUE(ProblemOutputMatchesReference(in, streamed.out, streamed.lse,
                                                Tolerance(in.dtype), kLseTolerance));
    }
  }
}

// A client built against the proto before the breadth fields (commit
// 14dca05): its bytes go through a generic call, and the answer, parsed
// with the old messages, holds no field the old proto does not know, the
// same shape it sent, and the same output as before: non-causal
// self-attention.
std::string Flatten(const grpc::ByteBuffer& buffer) {
  std::vector<grpc::Slice> slices;
  EXPECT_TRUE(buffer.Dump(&slices).ok());
  std::string bytes;
  for (const grpc::Slice& slice : slices) {
    bytes.append(reinterpret_cast<const char*>(slice.begin()), slice.size());
  }
  return bytes;
}

// Calls `method` of attnserve.v1.Attention with `request` bytes as they are.
grpc::Status CallWithBytes(grpc::GenericStub& stub, const std::string& method,
                           const std::string& request, std::string* response) {
  grpc::ClientContext context;
  context.set_deadline(absl::ToChronoTime(absl::Now() + absl::Seconds(120)));
  grpc::Slice slice(request);
  grpc::ByteBuffer request_buffer(&slice, 1);
  grpc::ByteBuffer response_buffer;
  grpc::Status status;
  absl::Notification done;
  stub.UnaryCall(&context, "/attnserve.v1.Attention/" + method, grpc::StubOptions(),
                 &request_buffer, &response_buffer, [&](grpc::Status s) {
                   status = std::move(s);
                   done.Notify();
                 });
  // The deadline bounds the call; this bound only guards against a hang.
  if (!done.WaitForNotificationWithTimeout(absl::Seconds(300))) {
    context.TryCancel();
    done.WaitForNotification();
  }
  if (status.ok()) *response = Flatten(response_buffer);
  return status;
}

// Every field of `message` (recursively) is known to its (old) descriptor.
::testing::AssertionResult NoUnknownFields(const google::protobuf::Message& message) {
  const google::protobuf::Reflection* reflection = message.GetReflection();
  if (!reflection->GetUnknownFields(message).empty()) {
    return ::testing::AssertionFailure()
           << message.GetTypeName() << " has fields the old proto does not know";
  }
  std::vector<const google::protobuf::FieldDescriptor*> fields;
  reflection->ListFields(message, &fields);
  for (const google::protobuf::FieldDescriptor* field : fields) {
    if (field->cpp_type() != google::protobuf::FieldDescriptor::CPPTYPE_MESSAGE ||
        field->is_repeated()) {
      continue;
    }
    ::testing::AssertionResult nested = NoUnknownFields(reflection->GetMessage(message, field));
    if (!nested) return nested;
  }
  return ::testing::AssertionSuccess();
}

TEST_F(E2eTest, OldProtoRequestIsAnsweredAsBefore) {
  namespace old = ::attnserve_compat::v1;
  const Shape shape = SmallShape(2, 1, 2);
  const HostInputs in = MakeRandomInputs(shape, DType::kBFloat16, FreshSeed());
  SCOPED_TRACE(Describe(in));
  const pb::AttendRequest current = MakeRequest(in, "old-client");
  old::AttendRequest legacy;
  legacy.set_request_id("old-client");
  legacy.set_dtype(old::DTYPE_BFLOAT16);
  legacy.mutable_shape()->set_batch(shape.batch);
  legacy.mutable_shape()->set_seq_len(shape.seq_len);
  legacy.mutable_shape()->set_num_heads(shape.num_heads);
  legacy.mutable_shape()->set_head_dim(shape.head_dim);
  legacy.set_q(current.q());
  legacy.set_k(current.k());
  legacy.set_v(current.v());
  const std::string wire = legacy.SerializeAsString();
  ASSERT_EQ(wire, current.SerializeAsString()) << "the proto change was not additive";

  grpc::GenericStub generic(server_->NewChannel());
  std::string answer;
  grpc::Status status = CallWithBytes(generic, "Attend", wire, &answer);
  ASSERT_TRUE(status.ok()) << status.error_message();
  old::AttendResponse response;
  ASSERT_TRUE(response.ParseFromString(answer));
  EXPECT_TRUE(NoUnknownFields(response));
  EXPECT_EQ(response.request_id(), "old-client");
  EXPECT_EQ(response.dtype(), old::DTYPE_BFLOAT16);
  EXPECT_EQ(response.shape().SerializeAsString(), legacy.shape().SerializeAsString());
  EXPECT_EQ(response.kernel(), *default_kernel_);
  EXPECT_EQ(response.backend(), kBackend);
  EXPECT_GT(response.kernel_tflops(), 0.0);
  EXPECT_TRUE(OutputMatchesReference(in, DefaultScale(shape), response.out(), Tolerance(in.dtype)));
  // The same request from a current client gets the same output.
  pb::AttendResponse now;
  status = Call(*stub_, current, &now);
  ASSERT_TRUE(status.ok()) << status.error_message();
  EXPECT_TRUE(now.out() == response.out()) << "old and current clients got different outputs";
  EXPECT_TRUE(now.lse().empty());

  // Its errors read as before, too.
  legacy.mutable_q()->resize(legacy.q().size() - 2);
  status = CallWithBytes(generic, "Attend", legacy.SerializeAsString(), &answer);
  EXPECT_EQ(status.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_EQ(status.error_message(),
            absl::StrCat("q has ", legacy.q().size(), " bytes; shape ", shape.ToString(),
                         " in bf16 needs ", legacy.q().size() + 2));

  // ListKernels still parses; its new capability fields are unknown there.
  status = CallWithBytes(generic, "ListKernels", old::ListKernelsRequest().SerializeAsString(),
                         &answer);
  ASSERT_TRUE(status.ok()) << status.error_message();
  old::ListKernelsResponse kernels;
  ASSERT_TRUE(kernels.ParseFromString(answer));
  ASSERT_EQ(kernels.kernels_size(), kernels_->kernels_size());
  EXPECT_EQ(kernels.kernels(0).name(), kernels_->kernels(0).name());
}

// Admission control and deadlines need a request that holds the only worker
// for a while: a CPU request of 34 GFLOP on one thread of the simple
// cpu_reference kernel (seconds; cpu_flash takes ~0.2 s; the checks
// below wait on the server's state, and only the deadline test assumes the
// slow request outlasts a 300 ms deadline).
// The slow request's length: it must hold the only worker for seconds while
// the test makes a few calls. Uninstrumented, S=4096 on cpu_reference takes
// seconds; under AddressSanitizer (the server is built alike) the reference
// runs about 10x slower, so half the length (a quarter of the work) still
// holds it for over 10 s, and S=4096 would cost the ASan run 45 s a test.
#if defined(__SANITIZE_ADDRESS__)
#define ATTN_E2E_UNDER_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define ATTN_E2E_UNDER_ASAN 1
#endif
#endif
#ifdef ATTN_E2E_UNDER_ASAN
constexpr int64_t kSlowRequestLength = 2048;
#else
constexpr int64_t kSlowRequestLength = 4096;
#endif

class QueueTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (kCuda) {
      GTEST_SKIP() << "needs a request slow enough to hold the only worker for seconds; a "
                      "GPU finishes any allowed request in milliseconds (the scheduler's "
                      "unit tests cover the same rules with a fake executor)";
    }
    auto server = ServerProcess::Start(
        {"--backend=cpu", "--cpu_workers=1", "--cpu_threads=1", "--queue_capacity=1"});
    ASSERT_TRUE(server.ok()) << server.status();
    server_ = *std::move(server);
    stub_ = pb::Attention::NewStub(server_->NewChannel());
  }

  // Starts the slow request and waits until it runs (in flight, not queued).
  void StartSlow(AsyncAttend& slow) {
    slow.request = MakeRequest(
        MakeRandomInputs({1, kSlowRequestLength, 8, 64}, DType::kBFloat16, 1), "slow");
    slow.request.set_kernel(kCpuKernelName);
    slow.Start(*stub_, absl::Seconds(300));
    ASSERT_TRUE(WaitForStats(
        *stub_, [](const pb::ServerStats& s) { return s.in_flight() == 1 && s.queued() == 0; }));
  }

  static pb::AttendRequest GoodRequest(const std::string& id) {
    return MakeRequest(MakeRandomInputs({1, 16, 2, 64}, DType::kBFloat16, FreshSeed()), id);
  }

  std::unique_ptr<ServerProcess> server_;
  std::unique_ptr<Stub> stub_;
};

TEST_F(QueueTest, FullQueueIsRefusedAtOnce) {
  AsyncAttend slow, queued;
  StartSlow(slow);
  queued.request = GoodRequest("queued");
  queued.Start(*stub_, absl::Seconds(300));
  ASSERT_TRUE(WaitForStats(*stub_, [](const pb::ServerStats& s) { return s.queued() == 1; }));

  pb::AttendResponse response;
  grpc::Status status = Call(*stub_, GoodRequest("refused"), &response);
  EXPECT_EQ(status.error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED) << status.error_message();
  EXPECT_NE(status.error_message().find("--queue_capacity=1"), std::string::npos)
      << status.error_message();
  // The refusal did not wait for the queue: it came while the slow request,
  // which alone could make room, was still running.
  EXPECT_FALSE(slow.done.HasBeenNotified()) << "inconclusive: the slow request already ended";

  ASSERT_TRUE(slow.Wait());
  ASSERT_TRUE(queued.Wait());
  EXPECT_TRUE(slow.status.ok()) << slow.status.error_message();
  EXPECT_TRUE(queued.status.ok()) << queued.status.error_message();
  const pb::ServerStats stats = GetStats(*stub_);
  EXPECT_EQ(stats.rejected_queue_full(), 1);
  EXPECT_EQ(stats.requests_ok(), 2);
  EXPECT_TRUE(Call(*stub_, GoodRequest("after"), &response).ok());
}

TEST_F(QueueTest, RequestWhoseDeadlinePassesInTheQueueIsNotRun) {
  AsyncAttend slow;
  StartSlow(slow);
  pb::AttendResponse response;
  grpc::Status status = Call(*stub_, GoodRequest("late"), &response, absl::Milliseconds(300));
  EXPECT_EQ(status.error_code(), grpc::StatusCode::DEADLINE_EXCEEDED) << status.error_message();
  EXPECT_FALSE(slow.done.HasBeenNotified()) << "inconclusive: the slow request already ended";
  ASSERT_TRUE(slow.Wait());
  EXPECT_TRUE(slow.status.ok()) << slow.status.error_message();
  // The worker reached the late request only after its deadline: dropped.
  ASSERT_TRUE(WaitForStats(*stub_, [](const pb::ServerStats& s) {
    return s.rejected_deadline() == 1 && s.in_flight() == 0;
  })) << GetStats(*stub_).DebugString();
  EXPECT_EQ(GetStats(*stub_).requests_ok(), 1) << "only the slow request ran";
  EXPECT_TRUE(Call(*stub_, GoodRequest("after"), &response).ok());
}

TEST_F(QueueTest, RequestCancelledInTheQueueIsNotRun) {
  AsyncAttend slow, cancelled;
  StartSlow(slow);
  cancelled.request = GoodRequest("cancelled");
  cancelled.Start(*stub_, absl::Seconds(300));
  ASSERT_TRUE(WaitForStats(*stub_, [](const pb::ServerStats& s) { return s.queued() == 1; }));
  cancelled.context.TryCancel();
  ASSERT_TRUE(cancelled.Wait());
  EXPECT_EQ(cancelled.status.error_code(), grpc::StatusCode::CANCELLED);
  ASSERT_TRUE(slow.Wait());
  ASSERT_TRUE(WaitForStats(*stub_, [](const pb::ServerStats& s) {
    return s.rejected_cancelled() == 1 && s.in_flight() == 0;
  })) << GetStats(*stub_).DebugString();
  EXPECT_EQ(GetStats(*stub_).requests_ok(), 1) << "only the slow request ran";
}

}  // namespace
}  // namespace attn::testing
