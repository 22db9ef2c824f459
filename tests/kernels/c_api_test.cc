// The C ABI (libattn_c.so): attn_forward_ex with the full problem, the
// seed's attn_forward, attn_forward_kvcache (paged, append, host-copy checks), attn_kernel_caps, and errors as status codes.
#include "attn/c_api.h"

#include <cmath>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "attn/cpu_reference.h"
#include "kv_cache_case.h"
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

// A paged cache with append and packed queries on the CPU, against float64
// over the gathered keys; the host copies of the tables are checked first.
TEST(CApiTest, ForwardKvCachePagedAppendOnTheCpu) {
  testing::KvCacheSpec spec;
  spec.name = "c api paged";
  spec.base = testing::DenseProblem(0, 0, 0, 8, 2, 64, /*causal=*/true);
  spec.cache_lens = {30, 0, 17};
  spec.new_lens = {1, 5, 16};
  spec.varlen = spec.append = true;
  spec.page_size = 16;
  spec.capacity = 64;
  const testing::KvCacheCase c = testing::MakeKvCacheCase(spec, DType::kFloat16, FreshSeed());
  const AttentionProblem& p = c.problem;
  std::vector<uint16_t> k = c.k_cache, v = c.v_cache, out(p.QElements(), kPoisonBits);
  std::vector<float> lse(p.LseElements(), NAN);
  attn_kv_cache_t cache = {};
  cache.k_cache = k.data();
  cache.v_cache = v.data();
  cache.cache_seqlens = cache.cache_seqlens_host = c.cache_seqlens.data();
  cache.block_table = cache.block_table_host = c.block_table.data();
  cache.page_size = p.page_size;
  cache.num_pages = p.num_pages;
  cache.max_pages_per_seq = p.max_pages_per_seq;
  cache.k_new = c.k_new.data();
  cache.v_new = c.v_new.data();
  cache.cu_seqlens_q_host = c.cu_seqlens_q.data();
  char error[256] = "";
  auto run = [&](const attn_kv_cache_t& with) {
    return attn_forward_kvcache("cpu_reference", ATTN_DTYPE_FLOAT16, c.q.data(), out.data(),
                                lse.data(), c.cu_seqlens_q.data(), &with, p.batch, p.seqlen_q,
                                p.heads_q, p.heads_kv, p.head_dim, /*causal=*/1, -1, -1, 0.0f,
                                p.total_q, 0, nullptr, 0, nullptr, error, sizeof(error));
  };
  ASSERT_EQ(run(cache), 0) << error;
  EXPECT_EQ(k, c.k_cache_after);
  EXPECT_EQ(v, c.v_cache_after);
  std::vector<float> q(c.q.size()), gk(c.gathered_k.size()), gv(c.gathered_v.size());
  ToFloat(c.q.data(), DType::kFloat16, q.size(), q.data());
  ToFloat(c.gathered_k.data(), DType::kFloat16, gk.size(), gk.data());
  ToFloat(c.gathered_v.data(), DType::kFloat16, gv.size(), gv.data());
  std::vector<double> ref_lse;
  const std::vector<double> ref = AttentionNaiveF64(c.gathered, q.data(), gk.data(), gv.data(),
                                                    c.gathered_cu_q.data(),
                                                    c.gathered_cu_k.data(), &ref_lse);
  EXPECT_LT(testing::RelativeL2Error(out, DType::kFloat16, ref), 1e-3) << c.Describe(DType::kFloat16);
  EXPECT_LT(testing::MaxLseError(lse, ref_lse), 1e-4) << c.Describe(DType::kFloat16);
  EXPECT_EQ(attn_kvcache_workspace_bytes("cpu_reference", &cache, p.batch, p.seqlen_q, p.heads_q,
                                         p.heads_kv, p.head_dim, p.total_q, 1, error,
                                         sizeof(error)),
            0)
      << error;

  // A used page out of range in the host copy: 3, naming the entry.
  std::vector<int32_t> bad_table = c.block_table;
  bad_table[2 * p.max_pages_per_seq + 1] = -5;
  attn_kv_cache_t bad = cache;
  bad.block_table_host = bad_table.data();
  EXPECT_EQ(run(bad), 3);
  EXPECT_NE(std::string(error).find("block_table[2][1] is -5"), std::string::npos) << error;
  // A page size that is not a power of two.
  bad = cache;
  bad.page_size = 12;
  EXPECT_EQ(run(bad), 3);
  EXPECT_NE(std::string(error).find("page_size is 12"), std::string::npos) << error;
  EXPECT_EQ(run(attn_kv_cache_t{}), 3) << "an empty cache description";
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
