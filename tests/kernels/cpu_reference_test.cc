// The CPU reference (the service's CPU backend) against naive float64.
#include "attn/cpu_reference.h"

#include <cmath>

#include <gtest/gtest.h>

#include "attn/attention.h"
#include "test_util.h"

namespace attn {
namespace {

using testing::CountNonFinite;
using testing::Describe;
using testing::FreshSeed;
using testing::HostInputs;
using testing::kPoisonBits;
using testing::MakeRandomInputs;
using testing::RelativeL2Error;

AttentionArgs ArgsFor(HostInputs& in, std::vector<uint16_t>& out, float scale = 0.0f) {
  out.assign(in.q.size(), kPoisonBits);
  AttentionArgs args;
  args.q = {in.q.data(), in.dtype, in.shape};
  args.k = {in.k.data(), in.dtype, in.shape};
  args.v = {in.v.data(), in.dtype, in.shape};
  args.out = {out.data(), in.dtype, in.shape};
  args.softmax_scale = scale;
  return args;
}

struct Case {
  Shape shape;
  float scale;
};

class CpuReferenceTest : public ::testing::TestWithParam<DType> {};

TEST_P(CpuReferenceTest, MatchesFloat64) {
  const Case cases[] = {
      {{1, 1, 1, 128}, 0.0f},  {{1, 17, 2, 64}, 0.0f},  {{2, 97, 3, 128}, 0.0f},
      {{1, 130, 1, 32}, 0.5f}, {{3, 64, 4, 128}, 0.0f}, {{1, 257, 2, 8}, 0.2f},
  };
  for (const Case& c : cases) {
    HostInputs in = MakeRandomInputs(c.shape, GetParam(), FreshSeed());
    std::vector<uint16_t> out;
    AttentionArgs args = ArgsFor(in, out, c.scale);
    ASSERT_TRUE(Forward(args, kCpuKernelName).ok());
    const double scale = c.scale != 0.0f ? c.scale : 1.0 / std::sqrt(c.shape.head_dim);
    std::vector<double> ref =
        AttentionNaiveF64(in.q_float.data(), in.k_float.data(), in.v_float.data(), in.shape,
                          scale);
    EXPECT_EQ(CountNonFinite(out, in.dtype), 0) << Describe(in);
    // Output rounding alone costs ~2^-9 (bf16) or ~2^-12 (fp16) relative.
    const double tolerance = GetParam() == DType::kBFloat16 ? 5e-3 : 1e-3;
    EXPECT_LT(RelativeL2Error(out, in.dtype, ref), tolerance) << Describe(in);
  }
}

// Work is split by rows, so the thread count must not change a single bit.
TEST_P(CpuReferenceTest, ThreadCountDoesNotChangeResult) {
  HostInputs in = MakeRandomInputs({2, 300, 3, 64}, GetParam(), FreshSeed());
  std::vector<uint16_t> one, many;
  AttentionCpu(ArgsFor(in, one), 1);
  AttentionCpu(ArgsFor(in, many), 7);
  EXPECT_EQ(one, many) << Describe(in);
}

// A large scale makes the softmax nearly one-hot: the online rescaling must
// neither overflow nor lose the maximum.
TEST_P(CpuReferenceTest, StableUnderLargeScores) {
  HostInputs in = MakeRandomInputs({1, 200, 1, 64}, GetParam(), FreshSeed());
  std::vector<uint16_t> out;
  AttentionArgs args = ArgsFor(in, out, 40.0f);
  ASSERT_TRUE(Forward(args, kCpuKernelName).ok());
  std::vector<double> ref = AttentionNaiveF64(in.q_float.data(), in.k_float.data(),
                                              in.v_float.data(), in.shape, 40.0);
  EXPECT_EQ(CountNonFinite(out, in.dtype), 0) << Describe(in);
  EXPECT_LT(RelativeL2Error(out, in.dtype, ref), 1e-2) << Describe(in);
}

INSTANTIATE_TEST_SUITE_P(AllDTypes, CpuReferenceTest,
                         ::testing::Values(DType::kFloat16, DType::kBFloat16),
                         [](const auto& param_info) { return std::string(DTypeName(param_info.param)); });

}  // namespace
}  // namespace attn
