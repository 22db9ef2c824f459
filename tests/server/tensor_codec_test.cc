// Unit tests of the front end's request checks (tensor_codec) and kernel
// selection (kernel_catalog), against the CPU backend's catalog and
// synthetic GPU kernel descriptions.
#include "tensor_codec.h"

#include <cmath>
#include <limits>
#include <string>

#include "gtest/gtest.h"
#include "kernel_catalog.h"

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
  EXPECT_EQ(spec->shape, (Shape{1, 4, 2, 64}));
  EXPECT_EQ(spec->softmax_scale, 0.0f);
  EXPECT_EQ(spec->kernel.name, kCpuKernelName);
  EXPECT_EQ(spec->TensorBytes(), 1024);

  pb::AttendRequest scaled = Valid();
  scaled.set_softmax_scale(0.25f);
  scaled.set_dtype(pb::DTYPE_FLOAT16);
  scaled.set_kernel(kCpuKernelName);
  spec = DecodeAttendRequest(scaled, limits_, catalog_);
  ASSERT_TRUE(spec.ok()) << spec.status();
  EXPECT_EQ(spec->softmax_scale, 0.25f);
  EXPECT_EQ(spec->dtype, DType::kFloat16);
}

TEST_F(CodecTest, RejectsBadDType) {
  pb::AttendRequest request = Valid();
  request.set_dtype(pb::DTYPE_UNSPECIFIED);
  ExpectError(request, absl::StatusCode::kInvalidArgument, "dtype is DTYPE_UNSPECIFIED");
  request.set_dtype(static_cast<pb::DType>(7));
  ExpectError(request, absl::StatusCode::kInvalidArgument, "dtype is 7");
}

TEST_F(CodecTest, RejectsMissingOrOutOfRangeShape) {
  pb::AttendRequest request = Valid();
  request.clear_shape();
  ExpectError(request, absl::StatusCode::kInvalidArgument, "shape is missing");

  request = Valid();
  request.mutable_shape()->set_batch(0);
  ExpectError(request, absl::StatusCode::kInvalidArgument, "shape.batch is 0");
  request = Valid();
  request.mutable_shape()->set_seq_len(-5);
  ExpectError(request, absl::StatusCode::kInvalidArgument, "shape.seq_len is -5");
  request = Valid();
  request.mutable_shape()->set_num_heads(int64_t{1} << 40);
  ExpectError(request, absl::StatusCode::kInvalidArgument,
              "shape.num_heads is 1099511627776; it must be between 1 and 2147483648");
}

TEST_F(CodecTest, RejectsShapesOverTheTokenLimit) {
  pb::AttendRequest request = Valid();
  request.mutable_shape()->set_seq_len(1 << 20);  // 2^20 * 2 * 64 = 2^27 elements
  ExpectError(request, absl::StatusCode::kResourceExhausted, "request needs 134217728 tokens");
  ExpectError(request, absl::StatusCode::kResourceExhausted,
              "this server's limit is 1048576 (--max_tokens_per_request)");
  // Every dimension at its maximum overflows int64; still a clean refusal.
  request.mutable_shape()->set_batch(kMaxDimension);
  request.mutable_shape()->set_seq_len(kMaxDimension);
  request.mutable_shape()->set_num_heads(kMaxDimension);
  request.mutable_shape()->set_head_dim(512);
  ExpectError(request, absl::StatusCode::kResourceExhausted, "more than 2^63");
}

TEST_F(CodecTest, RejectsUnsupportedHeadDim) {
  pb::AttendRequest request = Valid();
  request.mutable_shape()->set_head_dim(1024);
  ExpectError(request, absl::StatusCode::kInvalidArgument,
              "shape.head_dim is 1024; kernel 'cpu_reference' supports head_dim up to 512");
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
  PhaseTimes times;
  times.decode_ns = 1;
  times.queue_ns = 2;
  times.kernel_ns = 1000;
  times.total_ns = 2000;
  pb::AttendResponse response;
  EncodeResponseHeader(*spec, times, "cpu", "cpu (1 thread)", &response);
  EXPECT_EQ(response.request_id(), "r-1");
  EXPECT_EQ(response.dtype(), pb::DTYPE_BFLOAT16);
  EXPECT_EQ(response.shape().head_dim(), 64);
  EXPECT_EQ(response.timing().kernel_ns(), 1000);
  EXPECT_EQ(response.timing().total_ns(), 2000);
  EXPECT_EQ(response.kernel(), "cpu_reference");
  EXPECT_EQ(response.backend(), "cpu");
  EXPECT_EQ(response.device(), "cpu (1 thread)");
  // 4 * 1 * 2 * 4 * 4 * 64 flops in 1000 ns.
  EXPECT_DOUBLE_EQ(response.kernel_tflops(), 8192.0 / 1000.0 * 1e-3);
  EXPECT_TRUE(response.out().empty());
}

TEST(KernelCatalogTest, CpuCatalogHasOnlyTheReference) {
  absl::StatusOr<KernelCatalog> catalog = KernelCatalog::ForBackend(Backend::kCpu);
  ASSERT_TRUE(catalog.ok());
  ASSERT_EQ(catalog->kernels().size(), 1u);
  EXPECT_EQ(catalog->default_kernel().name, kCpuKernelName);
  absl::StatusOr<KernelInfo> kernel = catalog->Resolve("", Shape{1, 3, 1, 7});
  ASSERT_TRUE(kernel.ok()) << kernel.status();
  EXPECT_EQ(kernel->name, kCpuKernelName);
}

TEST(KernelCatalogTest, GpuKernelOnCpuBackendIsRefused) {
  absl::StatusOr<KernelCatalog> catalog = KernelCatalog::ForBackend(Backend::kCpu);
  ASSERT_TRUE(catalog.ok());
  for (const KernelInfo& kernel : ListKernels()) {
    if (kernel.backend != Backend::kCuda) continue;
    absl::StatusOr<KernelInfo> resolved = catalog->Resolve(kernel.name, Shape{1, 128, 1, 128});
    EXPECT_EQ(resolved.status().code(), absl::StatusCode::kFailedPrecondition) << kernel.name;
    EXPECT_NE(resolved.status().message().find("this server runs the cpu backend"),
              std::string::npos)
        << resolved.status();
  }
}

TEST(KernelCatalogTest, ShapeRulesOfGpuKernels) {
  KernelInfo gpu;
  gpu.name = "k07_autotuned";
  gpu.backend = Backend::kCuda;
  gpu.head_dim = 128;
  gpu.seq_multiple = 64;
  EXPECT_TRUE(CheckShapeForKernel(Shape{2, 128, 4, 128}, gpu).ok());
  absl::Status status = CheckShapeForKernel(Shape{1, 128, 4, 64}, gpu);
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(status.message(),
            "shape.head_dim is 64; kernel 'k07_autotuned' supports only head_dim 128");
  status = CheckShapeForKernel(Shape{1, 100, 4, 128}, gpu);
  EXPECT_EQ(status.message(),
            "shape.seq_len is 100; kernel 'k07_autotuned' needs a multiple of 64 (its block size)");
  status = CheckShapeForKernel(Shape{70000, 64, 1, 128}, gpu);
  EXPECT_NE(status.message().find("shape.batch is 70000"), std::string::npos) << status;
}

}  // namespace
}  // namespace attn::server
