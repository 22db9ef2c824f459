// Unit tests of the front end's request checks (tensor_codec) and kernel
// selection (kernel_catalog), against the CPU backend's catalog and
// synthetic GPU kernel descriptions.
#include "frontend/tensor_codec.h"

#include <cmath>
#include <functional>
#include <limits>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "attn/device.h"
#include "gtest/gtest.h"
#include "backends/kernel_catalog.h"

namespace attn::server {
namespace {

namespace pb = ::attnserve::v1;

class CodecTest : public ::testing::Test {
 protected:
  void SetUp() override {
    absl::StatusOr<KernelCatalog> catalog = KernelCatalog::ForBackend(Backend::kCpu);
    ASSERT_TRUE(catalog.ok()) << catalog.status();
    catalog_ = *std::move(catalog);
    limits_.max_tokens_per_request = 1 << 20;
  }

  // A valid bf16 request of shape [1, 4, 2, 64].
  static pb::AttendRequest Valid() {
    pb::AttendRequest request;
    request.set_request_id("r-1");
    request.set_dtype(pb::DTYPE_BFLOAT16);
    pb::TensorShape* shape = request.mutable_shape();
    shape->set_batch(1);
    shape->set_seq_len(4);
    shape->set_num_heads(2);
    shape->set_head_dim(64);
    const std::string bytes(1 * 4 * 2 * 64 * 2, '\0');
    request.set_q(bytes);
    request.set_k(bytes);
    request.set_v(bytes);
    return request;
  }

  // Decodes `request`; expects `code` and a message containing `text`.
  void ExpectError(const pb::AttendRequest& request, absl::StatusCode code,
                   const std::string& text) {
    absl::StatusOr<RequestSpec> spec = DecodeAttendRequest(request, limits_, catalog_);
    ASSERT_FALSE(spec.ok()) << "expected an error containing: " << text;
    EXPECT_EQ(spec.status().code(), code) << spec.status();
    EXPECT_NE(spec.status().message().find(text), std::string::npos)
        << "message: " << spec.status().message() << "\nexpected to contain: " << text;
  }

  KernelCatalog catalog_;
  Limits limits_;
};

TEST_F(CodecTest, DecodesAValidRequest) {
  absl::StatusOr<RequestSpec> spec = DecodeAttendRequest(Valid(), limits_, catalog_);
  ASSERT_TRUE(spec.ok()) << spec.status();
  EXPECT_EQ(spec->request_id, "r-1");
  EXPECT_EQ(spec->dtype, DType::kBFloat16);
  EXPECT_EQ(spec->problem.ToString(), AttentionProblem::SelfAttention(1, 4, 2, 64).ToString());
  EXPECT_EQ(spec->problem.softmax_scale, 0.0f);
  ASSERT_NE(spec->kernel, nullptr);
  EXPECT_EQ(spec->kernel_info().name, kCpuFlashKernelName);
  EXPECT_EQ(spec->QBytes(), 1024);
  EXPECT_EQ(spec->KVBytes(), 1024);
  EXPECT_EQ(spec->LseBytes(), 0);
  EXPECT_DOUBLE_EQ(spec->Flops(), 4.0 * 1 * 2 * 4 * 4 * 64);

  pb::AttendRequest scaled = Valid();
  scaled.set_softmax_scale(0.25f);
  scaled.set_dtype(pb::DTYPE_FLOAT16);
  scaled.set_kernel(kCpuKernelName);
  spec = DecodeAttendRequest(scaled, limits_, catalog_);
  ASSERT_TRUE(spec.ok()) << spec.status();
  EXPECT_EQ(spec->problem.softmax_scale, 0.25f);
  EXPECT_EQ(spec->dtype, DType::kFloat16);
}

// A request without the newer fields is non-causal self-attention, field
// by field.
TEST_F(CodecTest, RequestWithoutNewerFieldsIsSelfAttention) {
  absl::StatusOr<RequestSpec> spec = DecodeAttendRequest(Valid(), limits_, catalog_);
  ASSERT_TRUE(spec.ok()) << spec.status();
  const AttentionProblem& p = spec->problem;
  EXPECT_EQ(p.batch, 1);
  EXPECT_EQ(p.seqlen_q, 4);
  EXPECT_EQ(p.seqlen_k, 4);
  EXPECT_EQ(p.heads_q, 2);
  EXPECT_EQ(p.heads_kv, 2);
  EXPECT_EQ(p.head_dim, 64);
  EXPECT_FALSE(p.causal);
  EXPECT_EQ(p.window_left, -1);
  EXPECT_EQ(p.window_right, -1);
  EXPECT_FALSE(p.return_lse);
  EXPECT_FALSE(p.varlen);
  EXPECT_TRUE(spec->cu_seqlens_q.empty());
  EXPECT_TRUE(spec->cu_seqlens_k.empty());
}

TEST_F(CodecTest, DecodesKvShapeMaskWindowAndLse) {
  pb::AttendRequest request = Valid();  // Q [1, 4, 2, 64]
  request.mutable_shape()->set_kv_seq_len(6);
  request.mutable_shape()->set_kv_num_heads(1);
  request.set_k(std::string(1 * 6 * 1 * 64 * 2, '\0'));
  request.set_v(request.k());
  request.set_causal(true);
  request.set_window_left(3);
  request.set_return_lse(true);
  absl::StatusOr<RequestSpec> spec = DecodeAttendRequest(request, limits_, catalog_);
  ASSERT_TRUE(spec.ok()) << spec.status();
  const AttentionProblem& p = spec->problem;
  EXPECT_EQ(p.seqlen_q, 4);
  EXPECT_EQ(p.seqlen_k, 6);
  EXPECT_EQ(p.heads_kv, 1);
  EXPECT_TRUE(p.causal);
  EXPECT_EQ(p.window_left, 3);
  EXPECT_EQ(p.window_right, -1);
  EXPECT_TRUE(p.return_lse);
  EXPECT_EQ(spec->QBytes(), 1024);
  EXPECT_EQ(spec->KVBytes(), 768);
  EXPECT_EQ(spec->LseBytes(), 1 * 2 * 4 * 4);
  // An explicit -1 is the same as unset.
  request.set_window_right(-1);
  spec = DecodeAttendRequest(request, limits_, catalog_);
  ASSERT_TRUE(spec.ok()) << spec.status();
  EXPECT_EQ(spec->problem.window_right, -1);
  // Wrong K/V sizes name the tensor and its own shape.
  request.set_k(std::string(1024, '\0'));
  ExpectError(request, absl::StatusCode::kInvalidArgument,
              "k has 1024 bytes; shape [1, 6, 1, 64] in bf16 needs 768");
  request.set_k(std::string(768, '\0'));
  request.clear_v();
  ExpectError(request, absl::StatusCode::kInvalidArgument,
              "v is empty; shape [1, 6, 1, 64] in bf16 needs 768 bytes");
}

TEST_F(CodecTest, DecodesVarlen) {
  pb::AttendRequest request = Valid();
  request.mutable_shape()->set_batch(0);    // derived: 2 sequences
  request.mutable_shape()->set_seq_len(0);  // derived: the longest, 4
  for (int32_t offset : {0, 3, 7}) request.add_cu_seqlens_q(offset);
  for (int32_t offset : {0, 5, 6}) request.add_cu_seqlens_k(offset);
  request.set_q(std::string(7 * 2 * 64 * 2, '\0'));
  request.set_k(std::string(6 * 2 * 64 * 2, '\0'));
  request.set_v(request.k());
  absl::StatusOr<RequestSpec> spec = DecodeAttendRequest(request, limits_, catalog_);
  ASSERT_TRUE(spec.ok()) << spec.status();
  const AttentionProblem& p = spec->problem;
  EXPECT_TRUE(p.varlen);
  EXPECT_EQ(p.batch, 2);
  EXPECT_EQ(p.seqlen_q, 4);
  EXPECT_EQ(p.seqlen_k, 5);
  EXPECT_EQ(p.total_q, 7);
  EXPECT_EQ(p.total_k, 6);
  EXPECT_EQ(spec->cu_seqlens_q, (std::vector<int32_t>{0, 3, 7}));
  EXPECT_EQ(spec->cu_seqlens_k, (std::vector<int32_t>{0, 5, 6}));
  // Exact pairs: 3*5 + 4*1 (no mask).
  EXPECT_DOUBLE_EQ(spec->Flops(), 4.0 * 64 * 2 * (3 * 5 + 4 * 1));

  // Explicit batch and lengths: accepted when they hold every sequence.
  request.mutable_shape()->set_batch(2);
  request.mutable_shape()->set_seq_len(8);
  request.mutable_shape()->set_kv_seq_len(5);
  spec = DecodeAttendRequest(request, limits_, catalog_);
  ASSERT_TRUE(spec.ok()) << spec.status();
  EXPECT_EQ(spec->problem.seqlen_q, 8);
  EXPECT_EQ(spec->problem.seqlen_k, 5);

  pb::AttendRequest bad = request;
  bad.mutable_shape()->set_batch(3);
  ExpectError(bad, absl::StatusCode::kInvalidArgument,
              "shape.batch is 3 but cu_seqlens_q has 3 offsets, i.e. batch 2; set shape.batch to 2 or 0");
  bad = request;
  bad.mutable_shape()->set_seq_len(3);
  ExpectError(bad, absl::StatusCode::kInvalidArgument,
              "cu_seqlens_q: sequence 1 has 4 tokens");
  ExpectError(bad, absl::StatusCode::kInvalidArgument, "seqlen_q is shape.seq_len");
  bad = request;
  bad.clear_cu_seqlens_k();
  ExpectError(bad, absl::StatusCode::kInvalidArgument,
              "cu_seqlens_k is empty but cu_seqlens_q has 3 offsets");
  bad = request;
  bad.clear_cu_seqlens_q();
  ExpectError(bad, absl::StatusCode::kInvalidArgument,
              "cu_seqlens_q is empty but cu_seqlens_k has 3 offsets");
  bad = request;
  bad.add_cu_seqlens_k(6);
  ExpectError(bad, absl::StatusCode::kInvalidArgument,
              "cu_seqlens_q has 3 offsets and cu_seqlens_k 4");
  bad = request;
  bad.set_cu_seqlens_q(1, 8);  // 0, 8, 7
  ExpectError(bad, absl::StatusCode::kInvalidArgument, "offsets must be non-decreasing");
  bad = request;
  bad.set_cu_seqlens_k(0, 1);  // 1, 5, 6
  ExpectError(bad, absl::StatusCode::kInvalidArgument, "cu_seqlens_k[0] is 1; it must be 0");
  // The packed tokens come from the last offset: q's bytes must match it.
  bad = request;
  bad.set_cu_seqlens_q(2, 6);
  ExpectError(bad, absl::StatusCode::kInvalidArgument,
              "q has 1792 bytes; shape [6, 2, 64] packed by cu_seqlens_q in bf16 needs 1536");
}

TEST_F(CodecTest, RejectsMissingOrOutOfRangeShape) {
  pb::AttendRequest request = Valid();
  request.clear_shape();
  ExpectError(request, absl::StatusCode::kInvalidArgument, "shape is missing");

  request = Valid();
  request.mutable_shape()->set_batch(0);
  ExpectError(request, absl::StatusCode::kInvalidArgument, "batch is 0");
  ExpectError(request, absl::StatusCode::kInvalidArgument, "(batch is shape.batch)");
  request = Valid();
  request.mutable_shape()->set_seq_len(-5);
  ExpectError(request, absl::StatusCode::kInvalidArgument, "seqlen_q is -5");
  ExpectError(request, absl::StatusCode::kInvalidArgument, "seqlen_q is shape.seq_len");
  request = Valid();
  request.mutable_shape()->set_num_heads(int64_t{1} << 40);
  ExpectError(request, absl::StatusCode::kInvalidArgument,
              "heads_q is 1099511627776; it must be between 1 and 2147483648");
  request = Valid();
  request.mutable_shape()->set_kv_num_heads(-1);
  ExpectError(request, absl::StatusCode::kInvalidArgument, "heads_kv is -1");
  ExpectError(request, absl::StatusCode::kInvalidArgument,
              "heads_kv is shape.kv_num_heads, or shape.num_heads when 0");
  request = Valid();
  request.mutable_shape()->set_num_heads(6);
  request.mutable_shape()->set_kv_num_heads(4);
  ExpectError(request, absl::StatusCode::kInvalidArgument,
              "heads_q (6) must be a multiple of heads_kv (4)");
  request = Valid();
  request.set_window_left(-2);
  ExpectError(request, absl::StatusCode::kInvalidArgument, "window_left is -2");
}

TEST_F(CodecTest, RejectsTensorsOverTheTokenLimit) {
  pb::AttendRequest request = Valid();
  request.mutable_shape()->set_seq_len(1 << 20);  // 2^20 * 2 * 64 = 2^27 elements
  ExpectError(request, absl::StatusCode::kResourceExhausted,
              "q needs 134217728 elements (shape [1, 1048576, 2, 64])");
  ExpectError(request, absl::StatusCode::kResourceExhausted,
              "this server's limit is 1048576 (--max_tokens_per_request)");
  // K and V have their own bound.
  request = Valid();
  request.mutable_shape()->set_kv_seq_len(1 << 20);
  ExpectError(request, absl::StatusCode::kResourceExhausted,
              "k needs 134217728 elements (shape [1, 1048576, 2, 64])");
  // Varlen: each sequence counts as at least one token.
  request = Valid();
  request.mutable_shape()->set_batch(0);
  request.mutable_shape()->set_num_heads(1);
  request.mutable_shape()->set_head_dim(512);
  limits_.max_tokens_per_request = 4 * 512;
  for (int i = 0; i < 6; ++i) request.add_cu_seqlens_q(i < 2 ? 0 : 1);  // 5 sequences, 1 token
  *request.mutable_cu_seqlens_k() = request.cu_seqlens_q();
  ExpectError(request, absl::StatusCode::kResourceExhausted, "q needs 2560 elements");
}

TEST_F(CodecTest, RejectsUnsupportedHeadDim) {
  pb::AttendRequest request = Valid();
  request.mutable_shape()->set_head_dim(1024);
  ExpectError(request, absl::StatusCode::kInvalidArgument,
              "head_dim is 1024; kernel 'cpu_flash' supports head_dim up to 512 (head_dim is "
              "shape.head_dim)");
}

TEST_F(CodecTest, RejectsBadSoftmaxScale) {
  for (float scale : {0.0f, -1.0f, std::numeric_limits<float>::infinity(),
                      std::numeric_limits<float>::quiet_NaN()}) {
    pb::AttendRequest request = Valid();
    request.set_softmax_scale(scale);
    ExpectError(request, absl::StatusCode::kInvalidArgument, "softmax_scale is ");
    ExpectError(request, absl::StatusCode::kInvalidArgument, "must be finite and > 0");
  }
}

TEST_F(CodecTest, RejectsWrongByteCounts) {
  pb::AttendRequest request = Valid();
  request.set_q(std::string(1000, '\0'));
  ExpectError(request, absl::StatusCode::kInvalidArgument,
              "q has 1000 bytes; shape [1, 4, 2, 64] in bf16 needs 1024");
  request = Valid();
  request.set_k(std::string(1025, '\0'));
  ExpectError(request, absl::StatusCode::kInvalidArgument, "k has 1025 bytes");
  request = Valid();
  request.clear_v();
  ExpectError(request, absl::StatusCode::kInvalidArgument,
              "v is empty; shape [1, 4, 2, 64] in bf16 needs 1024 bytes");
}

TEST_F(CodecTest, RejectsBadKernelAndRequestId) {
  pb::AttendRequest request = Valid();
  request.set_kernel("no_such_kernel");
  ExpectError(request, absl::StatusCode::kNotFound, "kernel 'no_such_kernel' is unknown");
  request.set_kernel(std::string(200, 'k'));
  ExpectError(request, absl::StatusCode::kInvalidArgument, "kernel has 200 bytes");
  request = Valid();
  request.set_request_id(std::string(129, 'x'));
  ExpectError(request, absl::StatusCode::kInvalidArgument,
              "request_id has 129 bytes; the limit is 128");
  request.set_request_id("line\nbreak");
  ExpectError(request, absl::StatusCode::kInvalidArgument, "request_id has byte 0x0a");
}

TEST_F(CodecTest, HeaderDecodeIgnoresTensorBytes) {
  pb::AttendRequest request = Valid();
  request.clear_q();
  request.clear_k();
  request.clear_v();
  EXPECT_TRUE(DecodeRequestHeader(request, limits_, catalog_).ok());
}

TEST_F(CodecTest, EncodesResponseHeader) {
  absl::StatusOr<RequestSpec> spec = DecodeAttendRequest(Valid(), limits_, catalog_);
  ASSERT_TRUE(spec.ok());
  Job job;
  job.spec = *spec;
  job.times.decode_ns = 1;
  job.times.queue_ns = 2;
  job.times.kernel_ns = 1000;
  job.times.total_ns = 2000;
  job.device = "cpu (1 thread)";
  pb::AttendResponse response;
  EncodeResponseHeader(job, "cpu", &response);
  EXPECT_EQ(response.request_id(), "r-1");
  EXPECT_EQ(response.dtype(), pb::DTYPE_BFLOAT16);
  EXPECT_EQ(response.shape().head_dim(), 64);
  EXPECT_EQ(response.timing().kernel_ns(), 1000);
  EXPECT_EQ(response.timing().total_ns(), 2000);
  EXPECT_EQ(response.kernel(), "cpu_flash");
  EXPECT_EQ(response.backend(), "cpu");
  EXPECT_EQ(response.device(), "cpu (1 thread)");
  // 4 * 1 * 2 * 4 * 4 * 64 flops in 1000 ns.
  EXPECT_DOUBLE_EQ(response.kernel_tflops(), 8192.0 / 1000.0 * 1e-3);
  EXPECT_TRUE(response.out().empty());
  EXPECT_TRUE(response.lse().empty());
  // The shape comes back exactly as a request without kv fields sent it.
  EXPECT_EQ(response.shape().SerializeAsString(), Valid().shape().SerializeAsString());

  // Causal: 4 query rows see 1+2+3+4 keys; kv fields echoed when they differ.
  pb::AttendRequest causal = Valid();
  causal.set_causal(true);
  causal.mutable_shape()->set_kv_num_heads(1);
  causal.set_k(std::string(512, '\0'));
  causal.set_v(causal.k());
  spec = DecodeAttendRequest(causal, limits_, catalog_);
  ASSERT_TRUE(spec.ok()) << spec.status();
  job.spec = *spec;
  EncodeResponseHeader(job, "cpu", &response);
  EXPECT_DOUBLE_EQ(response.kernel_tflops(), 4.0 * 64 * 2 * 10 / 1000.0 * 1e-3);
  EXPECT_EQ(response.shape().kv_num_heads(), 1);
  EXPECT_EQ(response.shape().kv_seq_len(), 0);
}

TEST(KernelCatalogTest, CpuCatalogHasTheCpuKernelsWithFlashAsDefault) {
  absl::StatusOr<KernelCatalog> catalog = KernelCatalog::ForBackend(Backend::kCpu);
  ASSERT_TRUE(catalog.ok());
  ASSERT_EQ(catalog->kernels().size(), 2u);
  EXPECT_EQ(catalog->default_kernel().info().name, kCpuFlashKernelName);
  EXPECT_EQ(catalog->MinHeadDim(), 1);
  absl::StatusOr<const KernelHandle*> kernel =
      catalog->Resolve("", AttentionProblem::SelfAttention(1, 3, 1, 7));
  ASSERT_TRUE(kernel.ok()) << kernel.status();
  EXPECT_EQ(*kernel, &catalog->default_kernel()) << "resolved once, handed out by address";
}

// The production kernel and the ladder asked of a CPU-only build: a CUDA
// kernel this build does not have, not an unknown name (in a CUDA build the
// test above covers the CPU backend's refusal).
TEST(KernelCatalogTest, CudaKernelOfACpuOnlyBuildIsNamedAsSuch) {
  if (BuiltWithCuda()) GTEST_SKIP() << "a CUDA build has the CUDA kernels";
  absl::StatusOr<KernelCatalog> catalog = KernelCatalog::ForBackend(Backend::kCpu);
  ASSERT_TRUE(catalog.ok());
  for (const char* name : {kProductionKernelName, "k01_base", "k16_static_strides",
                           "k07/128x64_w4_sliced_db"}) {
    absl::StatusOr<const KernelHandle*> resolved =
        catalog->Resolve(name, AttentionProblem::SelfAttention(1, 128, 1, 128));
    EXPECT_EQ(resolved.status().code(), absl::StatusCode::kFailedPrecondition) << name;
    EXPECT_NE(resolved.status().message().find("is a CUDA kernel"), std::string::npos)
        << resolved.status();
  }
  absl::StatusOr<const KernelHandle*> unknown =
      catalog->Resolve("no_such_kernel", AttentionProblem::SelfAttention(1, 128, 1, 128));
  EXPECT_EQ(unknown.status().code(), absl::StatusCode::kNotFound) << unknown.status();
}

TEST(KernelCatalogTest, GpuKernelOnCpuBackendIsRefused) {
  absl::StatusOr<KernelCatalog> catalog = KernelCatalog::ForBackend(Backend::kCpu);
  ASSERT_TRUE(catalog.ok());
  for (const KernelInfo& kernel : ListKernels()) {
    if (kernel.backend != Backend::kCuda) continue;
    absl::StatusOr<const KernelHandle*> resolved =
        catalog->Resolve(kernel.name, AttentionProblem::SelfAttention(1, 128, 1, 128));
    EXPECT_EQ(resolved.status().code(), absl::StatusCode::kFailedPrecondition) << kernel.name;
    EXPECT_NE(resolved.status().message().find("this server runs the cpu backend"),
              std::string::npos)
        << resolved.status();
  }
}

// Synthetic GPU kernels: a ladder step (the seed's constraints) and one
// with every feature, in a catalog of their own. Nothing runs them.
absl::Status NeverRuns(const void*, const KernelInfo& info, const AttentionArgs&, CUstream_st*) {
  return absl::InternalError(absl::StrCat("kernel '", info.name, "' ran in a unit test"));
}

KernelHandle FakeGpuKernel(const std::string& name, bool every_feature) {
  KernelInfo info;
  info.name = name;
  info.backend = Backend::kCuda;
  KernelCapabilities& caps = info.caps;
  if (every_feature) {
    caps.head_dims = {64, 96, 128, 192, 256};
    caps.causal = caps.window = caps.gqa = caps.seqlen_q_ne_k = caps.lse = caps.varlen = true;
  } else {
    info.ladder_step = 7;
    caps.head_dims = {128};
    caps.seq_multiple = 64;
  }
  return KernelHandle(info, &NeverRuns, nullptr);
}

class GpuCatalogTest : public CodecTest {
 protected:
  void SetUp() override {
    limits_.max_tokens_per_request = 1 << 20;
    std::vector<KernelHandle> kernels = {FakeGpuKernel("k07_fake", false),
                                         FakeGpuKernel("flash_fake", true)};
    absl::StatusOr<KernelCatalog> catalog =
        KernelCatalog::FromKernels(Backend::kCuda, std::move(kernels), "flash_fake");
    ASSERT_TRUE(catalog.ok()) << catalog.status();
    catalog_ = *std::move(catalog);
  }

  // A self-attention request the ladder kernel accepts: [1, 64, 2, 128].
  static pb::AttendRequest LadderRequest() {
    pb::AttendRequest request = Valid();
    request.set_kernel("k07_fake");
    request.mutable_shape()->set_seq_len(64);
    request.mutable_shape()->set_head_dim(128);
    const std::string bytes(64 * 2 * 128 * 2, '\0');
    request.set_q(bytes);
    request.set_k(bytes);
    request.set_v(bytes);
    return request;
  }
};

TEST_F(GpuCatalogTest, DefaultIsTheKernelWithEveryFeature) {
  EXPECT_EQ(catalog_.MinHeadDim(), 64);
  pb::AttendRequest request = LadderRequest();
  request.clear_kernel();
  request.set_causal(true);
  request.set_window_left(16);
  request.set_return_lse(true);
  absl::StatusOr<RequestSpec> spec = DecodeAttendRequest(request, limits_, catalog_);
  ASSERT_TRUE(spec.ok()) << spec.status();
  EXPECT_EQ(spec->kernel_info().name, "flash_fake");
  EXPECT_EQ(spec->kernel, &catalog_.default_kernel());
}

TEST_F(GpuCatalogTest, LadderKernelRefusesWhatItCannotDo) {
  ASSERT_TRUE(DecodeAttendRequest(LadderRequest(), limits_, catalog_).ok());
  struct Case {
    std::string name;
    std::function<void(pb::AttendRequest&)> mutate;
    std::string message_part;
  };
  const std::vector<Case> cases = {
      {"window", [](pb::AttendRequest& r) { r.set_window_left(16); },
       "window_left is 16; kernel 'k07_fake' has no sliding window"},
      {"right window", [](pb::AttendRequest& r) { r.set_window_right(0); },
       "window_right is 0; kernel 'k07_fake' has no sliding window"},
      {"causal", [](pb::AttendRequest& r) { r.set_causal(true); },
       "causal is set; kernel 'k07_fake' has no causal mask"},
      {"lse", [](pb::AttendRequest& r) { r.set_return_lse(true); },
       "return_lse is set; kernel 'k07_fake' has no LSE output"},
      {"gqa", [](pb::AttendRequest& r) { r.mutable_shape()->set_kv_num_heads(1); },
       "heads_kv (1) differs from heads_q (2); kernel 'k07_fake' has no grouped-query attention"},
      {"kv_seq_len", [](pb::AttendRequest& r) { r.mutable_shape()->set_kv_seq_len(128); },
       "seqlen_q (64) differs from seqlen_k (128); kernel 'k07_fake' needs equal lengths"},
      {"head_dim", [](pb::AttendRequest& r) { r.mutable_shape()->set_head_dim(64); },
       "head_dim is 64; kernel 'k07_fake' supports 128"},
      {"seq multiple", [](pb::AttendRequest& r) { r.mutable_shape()->set_seq_len(100); },
       "seqlen_q is 100; kernel 'k07_fake' needs a multiple of 64"},
      {"varlen",
       [](pb::AttendRequest& r) {
         r.mutable_shape()->set_batch(0);
         for (int32_t offset : {0, 64}) {
           r.add_cu_seqlens_q(offset);
           r.add_cu_seqlens_k(offset);
         }
       },
       "varlen is set; kernel 'k07_fake' has no packed sequences (cu_seqlens) (varlen is set by "
       "cu_seqlens_q and cu_seqlens_k)"},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.name);
    pb::AttendRequest request = LadderRequest();
    c.mutate(request);
    ExpectError(request, absl::StatusCode::kInvalidArgument, c.message_part);
    // The same request is fine for the default kernel.
    request.clear_kernel();
    absl::StatusOr<RequestSpec> spec = DecodeRequestHeader(request, limits_, catalog_);
    if (c.name != "head_dim") {
      EXPECT_TRUE(spec.ok()) << spec.status();
    }
  }
}

}  // namespace
}  // namespace attn::server
