// ValidateArgs / Forward refuse every argument a kernel cannot take, with a
// message naming the field, and run nothing.
#include <gtest/gtest.h>

#include "attn/attention.h"
#include "test_util.h"

namespace attn {
namespace {

// A GPU-like kernel description, so the GPU rules are testable without CUDA.
KernelInfo GpuLikeKernel() {
  KernelInfo k;
  k.name = "test_gpu";
  k.ladder_step = 1;
  k.backend = Backend::kCuda;
  k.head_dim = 128;
  k.seq_multiple = 64;
  return k;
}

class ValidateTest : public ::testing::Test {
 protected:
  void SetUp() override {
    const Shape shape{2, 128, 4, 128};
    buffer_.assign(4 * shape.NumElements() + 64, 0);
    char* base = reinterpret_cast<char*>(buffer_.data());
    const int64_t bytes = shape.NumElements() * 2;
    args_.q = {base, DType::kBFloat16, shape};
    args_.k = {base + bytes, DType::kBFloat16, shape};
    args_.v = {base + 2 * bytes, DType::kBFloat16, shape};
    args_.out = {base + 3 * bytes, DType::kBFloat16, shape};
  }

  void ExpectInvalid(const KernelInfo& kernel, const std::string& needle) {
    absl::Status st = ValidateArgs(args_, kernel);
    EXPECT_EQ(st.code(), absl::StatusCode::kInvalidArgument) << st;
    EXPECT_NE(st.message().find(needle), std::string::npos)
        << "message '" << st.message() << "' should mention '" << needle << "'";
  }

  std::vector<uint64_t> buffer_;  // 8-byte elements: 16-byte alignment of base not assumed
  AttentionArgs args_;
};

TEST_F(ValidateTest, AcceptsGoodArguments) {
  // vector<uint64_t> storage from the allocator is 16-byte aligned on x86-64.
  EXPECT_TRUE(ValidateArgs(args_, GpuLikeKernel()).ok());
  EXPECT_TRUE(ValidateArgs(args_, *FindKernel(kCpuKernelName)).ok());
}

TEST_F(ValidateTest, RefusesNullPointers) {
  args_.k.data = nullptr;
  ExpectInvalid(GpuLikeKernel(), "k.data");
}

TEST_F(ValidateTest, RefusesMisalignedPointersOnGpu) {
  args_.v.data = static_cast<const char*>(args_.v.data) + 2;
  ExpectInvalid(GpuLikeKernel(), "v.data must be 16-byte aligned");
  EXPECT_TRUE(ValidateArgs(args_, *FindKernel(kCpuKernelName)).ok());
}

TEST_F(ValidateTest, RefusesMismatchedDTypes) {
  args_.out.dtype = DType::kFloat16;
  ExpectInvalid(GpuLikeKernel(), "out.dtype");
}

TEST_F(ValidateTest, RefusesMismatchedShapes) {
  args_.k.shape.seq_len = 64;
  ExpectInvalid(GpuLikeKernel(), "k.shape");
}

TEST_F(ValidateTest, RefusesZeroDimensions) {
  for (int64_t Shape::*dim : {&Shape::batch, &Shape::seq_len, &Shape::num_heads,
                              &Shape::head_dim}) {
    SetUp();
    args_.q.shape.*dim = 0;
    args_.k.shape = args_.v.shape = args_.out.shape = args_.q.shape;
    ExpectInvalid(GpuLikeKernel(), "must be between 1 and");
  }
}

TEST_F(ValidateTest, RefusesHugeShapes) {
  Shape huge{1 << 20, 1 << 20, 1 << 10, 128};
  args_.q.shape = args_.k.shape = args_.v.shape = args_.out.shape = huge;
  ExpectInvalid(GpuLikeKernel(), "elements");
}

TEST_F(ValidateTest, RefusesUnsupportedHeadDim) {
  Shape shape = args_.q.shape;
  shape.head_dim = 64;
  args_.q.shape = args_.k.shape = args_.v.shape = args_.out.shape = shape;
  ExpectInvalid(GpuLikeKernel(), "head_dim 128");
  shape.head_dim = kMaxCpuHeadDim + 1;
  args_.q.shape = args_.k.shape = args_.v.shape = args_.out.shape = shape;
  ExpectInvalid(*FindKernel(kCpuKernelName), "head_dim up to");
}

TEST_F(ValidateTest, RefusesSeqLenNotDivisibleByBlock) {
  Shape shape = args_.q.shape;
  shape.seq_len = 100;
  args_.q.shape = args_.k.shape = args_.v.shape = args_.out.shape = shape;
  ExpectInvalid(GpuLikeKernel(), "multiple of 64");
  EXPECT_TRUE(ValidateArgs(args_, *FindKernel(kCpuKernelName)).ok());
}

TEST_F(ValidateTest, RefusesBadScale) {
  args_.softmax_scale = -1.0f;
  ExpectInvalid(GpuLikeKernel(), "softmax_scale");
  args_.softmax_scale = std::numeric_limits<float>::infinity();
  ExpectInvalid(GpuLikeKernel(), "softmax_scale");
}

TEST(RegistryTest, UnknownKernelIsNotFoundAndListsNames) {
  absl::StatusOr<KernelInfo> k = FindKernel("k99_imaginary");
  ASSERT_EQ(k.status().code(), absl::StatusCode::kNotFound);
  EXPECT_NE(k.status().message().find(kCpuKernelName), std::string::npos);
}

TEST(RegistryTest, LadderIsOrderedAndNamesAreUnique) {
  std::vector<KernelInfo> kernels = ListKernels();
  ASSERT_FALSE(kernels.empty());
  EXPECT_EQ(kernels.front().name, kCpuKernelName);
  for (size_t i = 1; i < kernels.size(); ++i) {
    EXPECT_EQ(kernels[i].backend, Backend::kCuda);
    EXPECT_GT(kernels[i].ladder_step, kernels[i - 1].ladder_step) << kernels[i].name;
    EXPECT_EQ(kernels[i].head_dim, 128);
    EXPECT_GT(kernels[i].seq_multiple, 0);
  }
}

TEST(RegistryTest, ForwardRunsNothingOnInvalidArguments) {
  std::vector<uint16_t> q(8, 0x3c00), out(8, testing::kPoisonBits);
  AttentionArgs args;
  Shape shape{1, 1, 1, 8};
  args.q = {q.data(), DType::kFloat16, shape};
  args.k = {nullptr, DType::kFloat16, shape};
  args.v = {q.data(), DType::kFloat16, shape};
  args.out = {out.data(), DType::kFloat16, shape};
  EXPECT_EQ(Forward(args, kCpuKernelName).code(), absl::StatusCode::kInvalidArgument);
  for (uint16_t bits : out) EXPECT_EQ(bits, testing::kPoisonBits);
}

}  // namespace
}  // namespace attn
