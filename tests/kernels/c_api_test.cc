// The C ABI (libattn_c.so): attn_forward_ex with the full problem, the
// seed's attn_forward, attn_kernel_caps, and errors as status codes.
#include "attn/c_api.h"

#include <cmath>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "attn/cpu_reference.h"
#include "test_util.h"

namespace attn {
namespace {

using testing::FreshSeed;
using testing::kPoisonBits;
using testing::ProblemInputs;

TEST(CApiTest, ForwardExComputesEveryFeatureOnTheCpu) {
  AttentionProblem p;
  p.heads_q = 8;
  p.heads_kv = 2;
  p.head_dim = 64;
  p.causal = true;
  p.window_left = 40;
  p.return_lse = true;
  std::vector<int32_t> cu_q, cu_k;
  testing::SetVarlen(&p, {50, 0, 130}, {70, 9, 100}, &cu_q, &cu_k);
  const ProblemInputs in =
      testing::MakeProblemInputs(p, DType::kBFloat16, FreshSeed(), cu_q, cu_k);
  std::vector<uint16_t> out(p.QElements(), kPoisonBits);
  std::vector<float> lse(p.LseElements(), NAN);
  char error[256] = "";
  ASSERT_EQ(attn_forward_ex("cpu_reference", ATTN_DTYPE_BFLOAT16, in.q.data(), in.k.data(),
                            in.v.data(), out.data(), lse.data(), cu_q.data(), cu_k.data(),
                            p.batch, p.seqlen_q, p.seqlen_k, p.heads_q, p.heads_kv, p.head_dim,
                            /*causal=*/1, p.window_left, -1, 0.0f, p.total_q, p.total_k,
                            nullptr, error, sizeof(error)),
            0)
      << error;
  std::vector<double> ref_lse;
  const std::vector<double> ref = AttentionNaiveF64(p, in.q_float.data(), in.k_float.data(),
                                                    in.v_float.data(), cu_q.data(), cu_k.data(),
                                                    &ref_lse);
  EXPECT_EQ(testing::CountNonFinite(out, DType::kBFloat16), 0) << testing::Describe(in);
  EXPECT_LT(testing::RelativeL2Error(out, DType::kBFloat16, ref), 5e-3) << testing::Describe(in);
  EXPECT_LT(testing::MaxLseError(lse, ref_lse), 1e-4) << testing::Describe(in);
}

TEST(CApiTest, ForwardExDenseWithoutLse) {
  AttentionProblem p;
  p.batch = 2;
  p.seqlen_q = 33;
  p.seqlen_k = 70;
  p.heads_q = p.heads_kv = 2;
  p.head_dim = 32;
  p.window_left = 5;
  p.window_right = 5;
  p.softmax_scale = 0.2f;
  const ProblemInputs in = testing::MakeProblemInputs(p, DType::kFloat16, FreshSeed());
  std::vector<uint16_t> out(p.QElements(), kPoisonBits);
  ASSERT_EQ(attn_forward_ex("cpu_reference", ATTN_DTYPE_FLOAT16, in.q.data(), in.k.data(),
                            in.v.data(), out.data(), nullptr, nullptr, nullptr, p.batch,
                            p.seqlen_q, p.seqlen_k, p.heads_q, p.heads_kv, p.head_dim, 0, 5, 5,
                            0.2f, 0, 0, nullptr, nullptr, 0),
            0);
  const std::vector<double> ref =
      AttentionNaiveF64(p, in.q_float.data(), in.k_float.data(), in.v_float.data());
  EXPECT_LT(testing::RelativeL2Error(out, DType::kFloat16, ref), 1e-3) << testing::Describe(in);
}

TEST(CApiTest, SelfAttentionForwardIsUnchanged) {
  const Shape shape{1, 40, 2, 16};
  const testing::HostInputs in = testing::MakeRandomInputs(shape, DType::kFloat16, FreshSeed());
  std::vector<uint16_t> out(in.q.size(), kPoisonBits);
  ASSERT_EQ(attn_forward("cpu_reference", ATTN_DTYPE_FLOAT16, in.q.data(), in.k.data(),
                         in.v.data(), out.data(), 1, 40, 2, 16, 0.0f, nullptr, nullptr, 0),
            0);
  const std::vector<double> ref = AttentionNaiveF64(in.q_float.data(), in.k_float.data(),
                                                    in.v_float.data(), shape, 0.25);
  EXPECT_LT(testing::RelativeL2Error(out, DType::kFloat16, ref), 1e-3);
}

TEST(CApiTest, ErrorsAreStatusCodesWithMessages) {
  std::vector<uint16_t> buffer(64 * 6, 0);
  char error[128] = "";
  EXPECT_EQ(attn_forward_ex("cpu_reference", ATTN_DTYPE_FLOAT16, buffer.data(), buffer.data(),
                            buffer.data(), buffer.data(), nullptr, nullptr, nullptr, 1, 1, 1, 6,
                            4, 16, 0, -1, -1, 0.0f, 0, 0, nullptr, error, sizeof(error)),
            3);
  EXPECT_EQ(std::string(error), "heads_q (6) must be a multiple of heads_kv (4)");
  EXPECT_EQ(attn_forward_ex("k99", ATTN_DTYPE_FLOAT16, buffer.data(), buffer.data(),
                            buffer.data(), buffer.data(), nullptr, nullptr, nullptr, 1, 1, 1, 1,
                            1, 16, 0, -1, -1, 0.0f, 0, 0, nullptr, error, sizeof(error)),
            5);
  // One offset array without the other: varlen, and the missing one named.
  const int32_t cu[2] = {0, 1};
  EXPECT_EQ(attn_forward_ex("cpu_reference", ATTN_DTYPE_FLOAT16, buffer.data(), buffer.data(),
                            buffer.data(), buffer.data(), nullptr, cu, nullptr, 1, 1, 1, 1, 1,
                            16, 0, -1, -1, 0.0f, 1, 1, nullptr, error, sizeof(error)),
            3);
  EXPECT_EQ(std::string(error), "cu_seqlens_k must be given with varlen");
  EXPECT_EQ(attn_forward_ex("cpu_reference", 9, buffer.data(), buffer.data(), buffer.data(),
                            buffer.data(), nullptr, nullptr, nullptr, 1, 1, 1, 1, 1, 16, 0, -1,
                            -1, 0.0f, 0, 0, nullptr, nullptr, 0),
            3);
}

TEST(CApiTest, KernelCaps) {
  attn_kernel_caps_t caps;
  ASSERT_EQ(attn_kernel_caps("cpu_reference", &caps), 0);
  EXPECT_EQ(caps.backend, 0);
  EXPECT_EQ(caps.num_head_dims, 0);
  EXPECT_EQ(caps.max_head_dim, 512);
  EXPECT_EQ(caps.seq_multiple, 1);
  EXPECT_TRUE(caps.causal && caps.window && caps.gqa && caps.seqlen_q_ne_k && caps.lse &&
              caps.varlen && caps.strided);
  EXPECT_EQ(attn_kernel_caps("k99_imaginary", &caps), 5);
  EXPECT_EQ(attn_kernel_caps(nullptr, &caps), 3);
  EXPECT_EQ(attn_kernel_caps("cpu_reference", nullptr), 3);
}

}  // namespace
}  // namespace attn
