// ValidateArgs / ValidateProblem / ValidateCuSeqlens refuse every argument a
// kernel cannot take, with a message naming the field and the rule, and
// Forward runs nothing then.
#include "attn/validate.h"

#include <cmath>
#include <limits>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "attn/attention.h"
#include "attn/device.h"
#include "attn/ladder.h"
#include "test_util.h"

namespace attn {
namespace {

// A ladder-like GPU kernel (the seed's constraints) and a production-like
// one (every feature), so the GPU rules are testable without CUDA.
KernelInfo LadderLikeKernel() {
  KernelInfo k;
  k.name = "test_ladder";
  k.ladder_step = 1;
  k.backend = Backend::kCuda;
  k.caps.head_dims = {128};
  k.caps.seq_multiple = 64;
  k.caps.min_compute_capability = 80;
  return k;
}

KernelInfo ProductionLikeKernel() {
  KernelInfo k;
  k.name = "test_flash";
  k.backend = Backend::kCuda;
  k.caps.head_dims = {64, 96, 128, 192, 256};
  k.caps.causal = k.caps.window = k.caps.gqa = k.caps.seqlen_q_ne_k = k.caps.lse =
      k.caps.varlen = k.caps.strided = true;
  k.caps.min_compute_capability = 80;
  return k;
}

KernelInfo Cpu() { return *FindKernel(kCpuKernelName); }

class ValidateTest : public ::testing::Test {
 protected:
  void SetUp() override { Reset(AttentionProblem::SelfAttention(2, 128, 4, 128)); }

  // Dense arguments for `p` over one 16-byte aligned buffer, LSE and
  // offsets included (valid host offsets: equal lengths).
  void Reset(const AttentionProblem& p) {
    const int64_t q_bytes = p.QBytes(DType::kBFloat16), kv_bytes = p.KVBytes(DType::kBFloat16);
    buffer_.assign((2 * q_bytes + 2 * kv_bytes) / 8 + 16, 0);
    char* base = reinterpret_cast<char*>(buffer_.data());
    lse_.assign(p.QTokens() * p.heads_q + 4, 0.0f);
    args_ = AttentionArgs::Contiguous(p, DType::kBFloat16, base, base + q_bytes,
                                      base + q_bytes + kv_bytes, base + q_bytes + 2 * kv_bytes,
                                      lse_.data());
    cu_q_.clear();
    cu_k_.clear();
    for (int64_t b = 0; b <= p.batch; ++b) {
      cu_q_.push_back(static_cast<int32_t>(b * p.seqlen_q));
      cu_k_.push_back(static_cast<int32_t>(b * p.seqlen_k));
    }
    args_.cu_seqlens_q = cu_q_.data();
    args_.cu_seqlens_k = cu_k_.data();
  }

  // A varlen problem of `batch` sequences of seqlen_q / seqlen_k tokens each.
  void ResetVarlen(int64_t batch, int64_t seqlen_q, int64_t seqlen_k) {
    AttentionProblem p = AttentionProblem::SelfAttention(batch, seqlen_q, 4, 128);
    p.seqlen_k = seqlen_k;
    p.varlen = true;
    p.total_q = batch * seqlen_q;
    p.total_k = batch * seqlen_k;
    Reset(p);
  }

  void ExpectInvalid(const KernelInfo& kernel, const std::string& needle) {
    absl::Status st = ValidateArgs(args_, kernel);
    EXPECT_EQ(st.code(), absl::StatusCode::kInvalidArgument) << st;
    EXPECT_NE(st.message().find(needle), std::string::npos)
        << "message '" << st.message() << "' should mention '" << needle << "'";
  }
  void ExpectValid(const KernelInfo& kernel) {
    absl::Status st = ValidateArgs(args_, kernel);
    EXPECT_TRUE(st.ok()) << kernel.name << ": " << st;
  }

  AttentionProblem& problem() { return args_.problem; }

  std::vector<uint64_t> buffer_;  // 8-byte elements; the allocator gives 16-byte alignment
  std::vector<float> lse_;
  std::vector<int32_t> cu_q_, cu_k_;
  AttentionArgs args_;
};

TEST_F(ValidateTest, AcceptsGoodArguments) {
  ExpectValid(LadderLikeKernel());
  ExpectValid(ProductionLikeKernel());
  ExpectValid(Cpu());
}

TEST_F(ValidateTest, AcceptsEveryFeatureWhereCapable) {
  AttentionProblem p = AttentionProblem::SelfAttention(2, 100, 32, 96);
  p.seqlen_k = 1000;
  p.heads_kv = 8;
  p.causal = true;
  p.window_left = 16;
  p.return_lse = true;
  Reset(p);
  ExpectValid(ProductionLikeKernel());
  ExpectValid(Cpu());
  ResetVarlen(3, 100, 50);
  ExpectValid(ProductionLikeKernel());
  ExpectValid(Cpu());
}

TEST_F(ValidateTest, RefusesNullPointers) {
  args_.k = nullptr;
  ExpectInvalid(LadderLikeKernel(), "k is null");
  ExpectInvalid(Cpu(), "k is null");
  SetUp();
  args_.out = nullptr;
  ExpectInvalid(Cpu(), "out is null");
}

TEST_F(ValidateTest, RefusesMisalignedPointersOnGpu) {
  args_.v = static_cast<const char*>(args_.v) + 2;
  ExpectInvalid(LadderLikeKernel(), "must be 16-byte aligned for GPU kernels");
  ExpectValid(Cpu());
  args_.v = static_cast<const char*>(args_.v) - 1;  // odd: not even a 16-bit element
  ExpectInvalid(Cpu(), "v (");
}

TEST_F(ValidateTest, RefusesUnknownDType) {
  args_.dtype = static_cast<DType>(7);
  ExpectInvalid(Cpu(), "dtype is 7");
}

TEST_F(ValidateTest, RefusesOutOfRangeDimensions) {
  for (int64_t AttentionProblem::*dim :
       {&AttentionProblem::batch, &AttentionProblem::seqlen_q, &AttentionProblem::seqlen_k,
        &AttentionProblem::heads_q, &AttentionProblem::heads_kv, &AttentionProblem::head_dim}) {
    SetUp();
    problem().*dim = 0;
    ExpectInvalid(Cpu(), "is 0; it must be between 1 and");
    problem().*dim = -3;
    ExpectInvalid(ProductionLikeKernel(), "must be between 1 and");
    problem().*dim = (int64_t{1} << 31) + 1;
    ExpectInvalid(Cpu(), "must be between 1 and");
  }
}

TEST_F(ValidateTest, RefusesHugeProblems) {
  problem() = AttentionProblem::SelfAttention(1 << 20, 1 << 20, 1 << 10, 128);
  ExpectInvalid(Cpu(), "elements");
  problem() = AttentionProblem::SelfAttention(1, int64_t{1} << 31, int64_t{1} << 31, 512);
  ExpectInvalid(Cpu(), "elements");
}

TEST_F(ValidateTest, RefusesHeadsQNotAMultipleOfHeadsKv) {
  problem().heads_q = 32;
  problem().heads_kv = 6;
  ExpectInvalid(Cpu(), "heads_q (32) must be a multiple of heads_kv (6)");
}

TEST_F(ValidateTest, RefusesUnsupportedHeadDim) {
  problem().head_dim = 80;
  ExpectInvalid(ProductionLikeKernel(),
                "head_dim is 80; kernel 'test_flash' supports 64, 96, 128, 192, 256");
  problem().head_dim = 64;
  ExpectInvalid(LadderLikeKernel(), "head_dim is 64; kernel 'test_ladder' supports 128");
  problem().head_dim = kMaxCpuHeadDim + 1;
  ExpectInvalid(Cpu(), "head_dim up to 512");
}

TEST_F(ValidateTest, RefusesSeqLenNotAMultipleOfTheBlock) {
  AttentionProblem p = AttentionProblem::SelfAttention(1, 1000, 4, 128);
  Reset(p);
  ExpectInvalid(LadderLikeKernel(), "seqlen_q is 1000; kernel 'test_ladder' needs a multiple of 64");
  ExpectValid(Cpu());
  ExpectValid(ProductionLikeKernel());
}

TEST_F(ValidateTest, RefusesEachFeatureTheKernelLacks) {
  const KernelInfo ladder = LadderLikeKernel();
  problem().causal = true;
  ExpectInvalid(ladder, "causal is set; kernel 'test_ladder' has no causal mask");
  SetUp();
  problem().window_left = 16;
  ExpectInvalid(ladder, "window_left is 16; kernel 'test_ladder' has no sliding window");
  SetUp();
  problem().window_right = 0;
  ExpectInvalid(ladder, "window_right is 0; kernel 'test_ladder' has no sliding window");
  SetUp();
  problem().heads_kv = 2;
  ExpectInvalid(ladder, "heads_kv (2) differs from heads_q (4); kernel 'test_ladder'");
  SetUp();
  problem().seqlen_k = 64;
  ExpectInvalid(ladder, "seqlen_q (128) differs from seqlen_k (64); kernel 'test_ladder'");
  SetUp();
  problem().return_lse = true;
  ExpectInvalid(ladder, "return_lse is set; kernel 'test_ladder' has no LSE output");
  ResetVarlen(2, 128, 128);
  ExpectInvalid(ladder, "varlen is set; kernel 'test_ladder'");
  SetUp();
  args_.k_strides.row += 8;
  args_.v_strides.row += 8;
  ExpectInvalid(ladder, "k_strides (batch 65536, row 520, head 128) are not contiguous");
  ExpectValid(ProductionLikeKernel());
}

TEST_F(ValidateTest, RefusesBadScale) {
  for (float scale : {-1.0f, std::numeric_limits<float>::infinity(),
                      std::numeric_limits<float>::quiet_NaN()}) {
    problem().softmax_scale = scale;
    ExpectInvalid(Cpu(), "softmax_scale");
  }
  problem().softmax_scale = 0.0f;  // 1/sqrt(head_dim)
  ExpectValid(Cpu());
}

TEST_F(ValidateTest, RefusesWindowBelowMinusOne) {
  problem().window_left = -2;
  ExpectInvalid(Cpu(), "window_left is -2; it must be >= -1");
  problem().window_left = -1;
  problem().window_right = -5;
  ExpectInvalid(ProductionLikeKernel(), "window_right is -5; it must be >= -1");
}

TEST_F(ValidateTest, RefusesMissingLse) {
  problem().return_lse = true;
  args_.lse = nullptr;
  ExpectInvalid(Cpu(), "lse is null but return_lse is set");
  // Without return_lse the pointer is not used.
  problem().return_lse = false;
  ExpectValid(Cpu());
}

TEST_F(ValidateTest, RefusesVarlenWithoutOffsetsOrTotals) {
  ResetVarlen(2, 64, 64);
  args_.cu_seqlens_q = nullptr;
  ExpectInvalid(ProductionLikeKernel(), "cu_seqlens_q must be given with varlen");
  ResetVarlen(2, 64, 64);
  args_.cu_seqlens_k = nullptr;
  ExpectInvalid(Cpu(), "cu_seqlens_k must be given with varlen");
  ResetVarlen(2, 64, 64);
  problem().total_q = 0;
  ExpectInvalid(ProductionLikeKernel(), "total_q is 0; with varlen it must be between 1 and");
  ResetVarlen(2, 64, 64);
  problem().total_k = int64_t{1} << 31;
  ExpectInvalid(ProductionLikeKernel(), "total_k is 2147483648");
  // Without varlen, totals and offsets are ignored.
  SetUp();
  problem().total_q = -1;
  args_.cu_seqlens_q = nullptr;
  ExpectValid(Cpu());
}

// The CPU kernel reads its host offsets; GPU kernels cannot, so their
// ValidateArgs leaves the contents to the caller (ValidateCuSeqlens).
TEST_F(ValidateTest, ChecksHostOffsetsOnlyForTheCpu) {
  ResetVarlen(3, 64, 32);
  cu_q_[2] = 200;  // sequence 1 has 136 tokens > seqlen_q, then sequence 2 is negative
  ExpectInvalid(Cpu(), "cu_seqlens_q: sequence 1 has 136 tokens");
  ExpectValid(ProductionLikeKernel());
}

TEST(ValidateCuSeqlensTest, AcceptsGoodOffsets) {
  const std::vector<int32_t> cu = {0, 5, 5, 12};
  EXPECT_TRUE(ValidateCuSeqlens(cu.data(), 3, 12, 7, "cu_seqlens_q").ok());
}

TEST(ValidateCuSeqlensTest, RefusesBadOffsets) {
  auto expect = [](const std::vector<int32_t>& cu, int64_t total, int64_t max_len,
                   const char* field, const std::string& needle) {
    const absl::Status st =
        ValidateCuSeqlens(cu.data(), static_cast<int64_t>(cu.size()) - 1, total, max_len, field);
    EXPECT_EQ(st.code(), absl::StatusCode::kInvalidArgument) << st;
    EXPECT_NE(st.message().find(needle), std::string::npos)
        << "message '" << st.message() << "' should mention '" << needle << "'";
  };
  expect({1, 5, 12}, 12, 10, "cu_seqlens_q", "cu_seqlens_q[0] is 1; it must be 0");
  expect({0, 5, 4}, 4, 10, "cu_seqlens_k", "cu_seqlens_k[2] (4) is less than cu_seqlens_k[1] (5)");
  expect({0, 5, 12}, 13, 10, "cu_seqlens_q",
         "cu_seqlens_q[2] (the last) is 12; it must equal total_q (13)");
  expect({0, 5, 12}, 12, 6, "cu_seqlens_k", "sequence 1 has 7 tokens");
  expect({0, 5, 12}, 12, 6, "cu_seqlens_k", "more than seqlen_k (6)");
  EXPECT_EQ(ValidateCuSeqlens(nullptr, 2, 12, 6, "cu_seqlens_q").code(),
            absl::StatusCode::kInvalidArgument);
}

TEST_F(ValidateTest, RefusesStridesGpuKernelsCannotLoad) {
  const KernelInfo flash = ProductionLikeKernel();
  args_.q_strides.row += 4;  // 8-byte rows
  ExpectInvalid(flash, "q_strides.row is 516; GPU kernels load 16-byte chunks");
  ExpectValid(Cpu());
  SetUp();
  args_.v_strides.head = -128;
  ExpectInvalid(Cpu(), "v_strides.head is -128; strides must be between 0");
}

TEST_F(ValidateTest, RefusesDifferentKAndVRowStridesOnGpu) {
  args_.v_strides.row += 8;
  ExpectInvalid(ProductionLikeKernel(), "v_strides.row (520) differs from k_strides.row (512)");
  ExpectValid(Cpu());
}

TEST_F(ValidateTest, AcceptsPaddedStridesWhereStrided) {
  args_.q_strides = {200000, 1024, 136};
  args_.k_strides = {100000, 640, 128};
  args_.v_strides = {0, 640, 128};  // one sequence broadcast over the batch
  args_.out_strides = {70000, 544, 136};
  ExpectValid(ProductionLikeKernel());
  ExpectValid(Cpu());
  ExpectInvalid(LadderLikeKernel(), "not contiguous");
}

TEST_F(ValidateTest, IgnoresStridesOfSizeOneDimensions) {
  Reset(AttentionProblem::SelfAttention(1, 128, 1, 128));
  args_.q_strides.batch = 3;  // batch 1: never used
  args_.q_strides.head = 5;   // one head: never used
  ExpectValid(LadderLikeKernel());
}

TEST_F(ValidateTest, RefusesOverlappingOutput) {
  args_.out_strides.head = 64;  // heads overlap within a row
  ExpectInvalid(ProductionLikeKernel(), "make output elements overlap");
  ExpectInvalid(Cpu(), "out_strides");
  SetUp();
  args_.out_strides.row = 0;  // every token on the same row
  ExpectInvalid(Cpu(), "make output elements overlap");
  // Inputs may overlap (broadcast).
  SetUp();
  args_.k_strides.row = 0;
  ExpectValid(Cpu());
}

TEST_F(ValidateTest, RefusesGridLimitsOnGpu) {
  problem().heads_q = problem().heads_kv = 70000;
  problem().seqlen_q = problem().seqlen_k = 64;
  problem().head_dim = 128;
  ExpectInvalid(ProductionLikeKernel(), "at most 65535 on GPU kernels");
}

TEST(ValidateProblemTest, ChecksTheShapeWithoutPointers) {
  AttentionProblem p = AttentionProblem::SelfAttention(1, 100, 32, 128);
  p.heads_kv = 8;
  p.causal = true;
  EXPECT_TRUE(ValidateProblem(p, *FindKernel(kCpuKernelName)).ok());
  EXPECT_TRUE(ValidateProblem(p, ProductionLikeKernel()).ok());
  EXPECT_EQ(ValidateProblem(p, LadderLikeKernel()).code(), absl::StatusCode::kInvalidArgument);
}

TEST(RegistryTest, UnknownKernelIsNotFoundAndListsNames) {
  absl::StatusOr<KernelInfo> k = FindKernel("k99_imaginary");
  ASSERT_EQ(k.status().code(), absl::StatusCode::kNotFound);
  EXPECT_NE(k.status().message().find(kCpuKernelName), std::string::npos);
}

TEST(RegistryTest, CpuKernelHasEveryFeature) {
  const KernelInfo cpu = *FindKernel(kCpuKernelName);
  EXPECT_EQ(cpu.backend, Backend::kCpu);
  EXPECT_TRUE(cpu.caps.head_dims.empty());
  EXPECT_TRUE(cpu.caps.causal && cpu.caps.window && cpu.caps.gqa && cpu.caps.seqlen_q_ne_k &&
              cpu.caps.lse && cpu.caps.varlen && cpu.caps.strided);
}

TEST(RegistryTest, LadderIsOrderedAndNamesAreUnique) {
  ladder::Register();
  std::vector<KernelInfo> kernels = ListKernels();
  ASSERT_FALSE(kernels.empty());
  ASSERT_GE(kernels.size(), 2u);
  EXPECT_EQ(kernels[0].name, kCpuKernelName);
  EXPECT_EQ(kernels[1].name, kCpuFlashKernelName);
  int last_step = 0;
  for (size_t i = 2; i < kernels.size(); ++i) {
    EXPECT_EQ(kernels[i].backend, Backend::kCuda) << kernels[i].name;
    EXPECT_GT(kernels[i].caps.seq_multiple, 0) << kernels[i].name;
    for (size_t j = 0; j < i; ++j) EXPECT_NE(kernels[i].name, kernels[j].name);
    if (kernels[i].ladder_step == 0) {  // the production kernel, after the ladder
      EXPECT_EQ(kernels[i].name, kProductionKernelName);
      continue;
    }
    EXPECT_GT(kernels[i].ladder_step, last_step) << kernels[i].name;
    last_step = kernels[i].ladder_step;
    EXPECT_EQ(kernels[i].caps.head_dims, std::vector<int>{128}) << kernels[i].name;
  }
}

// A ladder name is known in every build; without CUDA it says what it is.
TEST(RegistryTest, LadderNamesAreCudaKernelsEvenWithoutCuda) {
  ladder::Register();
  for (const char* name : {"k01_base", "k07_autotuned", "k07/128x64_w4_sliced"}) {
    const absl::StatusOr<KernelInfo> info = FindKernel(name);
    if (BuiltWithCuda()) {
      ASSERT_TRUE(info.ok()) << name << ": " << info.status();
      EXPECT_EQ(info->backend, Backend::kCuda) << name;
      EXPECT_EQ(info->family, "ampere") << name;
      EXPECT_GT(info->ladder_step, 0) << name;
    } else {
      ASSERT_EQ(info.status().code(), absl::StatusCode::kFailedPrecondition) << name;
      EXPECT_NE(info.status().message().find("is a CUDA kernel"), std::string::npos)
          << info.status();
    }
  }
}

TEST(RegistryTest, ForwardRunsNothingOnInvalidArguments) {
  std::vector<uint16_t> q(8, 0x3c00), out(8, testing::kPoisonBits);
  const AttentionProblem p = AttentionProblem::SelfAttention(1, 1, 1, 8);
  AttentionArgs args =
      AttentionArgs::Contiguous(p, DType::kFloat16, q.data(), nullptr, q.data(), out.data());
  EXPECT_EQ(Forward(args, kCpuKernelName).code(), absl::StatusCode::kInvalidArgument);
  for (uint16_t bits : out) EXPECT_EQ(bits, testing::kPoisonBits);
}

}  // namespace
}  // namespace attn
