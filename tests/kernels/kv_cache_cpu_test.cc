// The CPU kernels (cpu_flash and cpu_reference) on K/V cache problems (dense
// and paged caches, append, shared prefix pages, varlen queries, every mask)
// against float64 on the same attention over keys gathered out of the cache;
// the cache after the call exactly the expected one; bad tables and lengths
// refused naming the field before anything is read or written.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <string>
#include <tuple>
#include <vector>

#include "attn/attention.h"
#include "attn/cpu_reference.h"
#include "attn/validate.h"
#include "kv_cache_case.h"
#include "test_util.h"

namespace attn {
namespace {

using testing::FreshSeed;
using testing::KvCacheCase;
using testing::KvCacheSpec;
using testing::KvHeads;
using testing::KvSpec;
using testing::MakeKvCacheCase;

const float kLsePoison = std::numeric_limits<float>::quiet_NaN();

std::vector<float> Floats(const std::vector<uint16_t>& bits, DType dtype) {
  std::vector<float> values(bits.size());
  ToFloat(bits.data(), dtype, bits.size(), values.data());
  return values;
}

// The case's host tensors, as the CPU kernel takes them; the cache is a
// copy the call may write.
struct HostCall {
  explicit HostCall(const KvCacheCase& c)
      : k(c.k_cache),
        v(c.v_cache),
        out(c.q.size(), testing::kPoisonBits),
        lse(c.problem.return_lse ? c.problem.LseElements() : 0, kLsePoison) {
    const AttentionProblem& p = c.problem;
    args = AttentionArgs::Contiguous(p, DType::kBFloat16, c.q.data(), k.data(), v.data(),
                                     out.data(), p.return_lse ? lse.data() : nullptr);
    args.cache_seqlens = c.cache_seqlens.data();
    if (p.Paged()) args.block_table = c.block_table.data();
    if (p.varlen) args.cu_seqlens_q = c.cu_seqlens_q.data();
    if (p.append) {
      args.k_new = c.k_new.data();
      args.v_new = c.v_new.data();
    }
  }
  std::vector<uint16_t> k, v, out;
  std::vector<float> lse;
  AttentionArgs args;
};

void CheckCase(const std::string& kernel, const KvCacheSpec& spec, DType dtype) {
  const KvCacheCase c = MakeKvCacheCase(spec, dtype, FreshSeed());
  SCOPED_TRACE(kernel + " " + c.Describe(dtype));
  HostCall call(c);
  call.args.dtype = dtype;
  const absl::Status st = Forward(call.args, kernel);
  ASSERT_TRUE(st.ok()) << st;
  EXPECT_EQ(call.k, c.k_cache_after) << "K cache after the call";
  EXPECT_EQ(call.v, c.v_cache_after) << "V cache after the call";
  std::vector<double> ref_lse;
  const std::vector<float> q = Floats(c.q, dtype), k = Floats(c.gathered_k, dtype),
                           v = Floats(c.gathered_v, dtype);
  const std::vector<double> ref =
      AttentionNaiveF64(c.gathered, q.data(), k.data(), v.data(), c.gathered_cu_q.data(),
                        c.gathered_cu_k.data(), &ref_lse);
  EXPECT_EQ(testing::CountNonFinite(call.out, dtype), 0) << "unwritten or non-finite outputs";
  EXPECT_LT(testing::RelativeL2Error(call.out, dtype, ref),
            dtype == DType::kBFloat16 ? 5e-3 : 1e-3);
  if (c.problem.return_lse) {
    EXPECT_LT(testing::MaxLseError(call.lse, c.LseInProblemLayout(ref_lse)), 1e-4);
  }
  // Rows that see no key: exactly 0 (the gathered LSE is [heads_q, total_q]).
  const int64_t total = c.problem.QTokens(), heads = c.problem.heads_q, d = c.problem.head_dim;
  for (int64_t row = 0; row < total; ++row) {
    for (int64_t h = 0; h < heads; ++h) {
      if (!std::isinf(ref_lse[h * total + row])) continue;
      for (int64_t i = 0; i < d; ++i) {
        ASSERT_EQ(BitsToFloat(call.out[(row * heads + h) * d + i], dtype), 0.0f)
            << "row " << row << " head " << h << " sees no key";
      }
    }
  }
}

std::vector<KvCacheSpec> Cases() {
  AttentionProblem window = KvHeads(8, 2, 64);
  window.window_left = 20;
  AttentionProblem scaled_no_lse = KvHeads(4, 4, 96, false);
  scaled_no_lse.softmax_scale = 0.3f;
  scaled_no_lse.return_lse = false;
  return {
      KvSpec("dense decode", KvHeads(8, 2, 64), {0, 5, 100, 37}, {1, 1, 1, 1}, 0, 128, false),
      KvSpec("dense decode append", KvHeads(8, 2, 64), {0, 5, 99, 37}, {1, 1, 1, 1}, 0, 100, true),
      KvSpec("dense speculative append MQA", KvHeads(8, 1, 128), {3, 60}, {4, 4}, 0, 70, true),
      KvSpec("paged 16 decode append", KvHeads(8, 2, 64), {0, 15, 16, 17, 100}, {1, 1, 1, 1, 1}, 16,
             160, true),
      KvSpec("paged 1", KvHeads(4, 2, 64), {0, 1, 9}, {1, 1, 1}, 1, 12, true),
      KvSpec("paged 64 speculative", KvHeads(16, 4, 128), {63, 64, 200}, {4, 4, 4}, 64, 256, true),
      KvSpec("paged 16 no append Sq=3", KvHeads(8, 8, 64, false), {40, 1, 33}, {3, 3, 3}, 16, 48,
             false),
      KvSpec("varlen chunks append", KvHeads(8, 2, 64), {10, 0, 50, 64, 0}, {7, 0, 30, 1, 0}, 16,
             96, true, true),
      KvSpec("varlen window", window, {100, 3, 50}, {5, 1, 20}, 32, 128, true, true),
      KvSpec("shared prefix", KvHeads(8, 2, 64), {40, 70, 33}, {1, 1, 1}, 16, 96, false, false,
             true),
      KvSpec("shared prefix append", KvHeads(8, 2, 64), {40, 70, 33}, {2, 2, 2}, 16, 96, true,
             false, true),
      KvSpec("D=256 paged 128", KvHeads(4, 1, 256), {300, 129}, {1, 1}, 128, 384, true),
      KvSpec("scale, no LSE, dense", scaled_no_lse, {20, 50}, {2, 2}, 0, 64, true),
  };
}

// Parameters: the kernel's name and the dtype.
class KvCacheCpuTest : public ::testing::TestWithParam<std::tuple<std::string, DType>> {};

TEST_P(KvCacheCpuTest, MatchesFloat64OverTheGatheredKeys) {
  const auto& [kernel, dtype] = GetParam();
  for (const KvCacheSpec& spec : Cases()) ASSERT_NO_FATAL_FAILURE(CheckCase(kernel, spec, dtype));
}

INSTANTIATE_TEST_SUITE_P(KernelsAndDTypes, KvCacheCpuTest,
                         ::testing::Combine(::testing::Values(std::string(kCpuFlashKernelName),
                                                              std::string(kCpuKernelName)),
                                            ::testing::Values(DType::kFloat16, DType::kBFloat16)),
                         [](const auto& info) {
                           return std::get<0>(info.param) + "_" +
                                  std::string(DTypeName(std::get<1>(info.param)));
                         });

// Bad tables, lengths and shapes: INVALID_ARGUMENT naming the field, and
// nothing written (output still poison, the cache unchanged).
TEST(KvCacheCpuValidation, RefusesBadTablesAndLengths) {
  const KvCacheCase c = MakeKvCacheCase(
      KvSpec("bad input", KvHeads(8, 2, 64), {5, 20}, {1, 1}, 16, 32, true), DType::kBFloat16, 7);
  auto expect_refused = [&](const std::string& needle, auto&& spoil) {
    KvCacheCase bad = c;
    HostCall call(bad);
    spoil(bad, call.args);
    const absl::Status st = Forward(call.args, kCpuKernelName);
    EXPECT_EQ(st.code(), absl::StatusCode::kInvalidArgument) << needle << ": " << st;
    EXPECT_NE(st.message().find(needle), std::string::npos)
        << "'" << st.message() << "' should mention '" << needle << "'";
    EXPECT_EQ(call.k, c.k_cache) << needle << ": the cache was written";
    for (uint16_t bits : call.out) ASSERT_EQ(bits, testing::kPoisonBits) << needle;
  };
  // A used page out of range, either side; entries past the used pages are
  // never read (MakeKvCacheCase fills them with out-of-range indices).
  expect_refused("block_table[1][1] is", [&](KvCacheCase& b, AttentionArgs& a) {
    b.block_table[1 * 2 + 1] = static_cast<int32_t>(b.problem.num_pages);
    a.block_table = b.block_table.data();
  });
  expect_refused("block_table[0][0] is -1", [&](KvCacheCase& b, AttentionArgs& a) {
    b.block_table[0] = -1;
    a.block_table = b.block_table.data();
  });
  // Cache lengths: negative, or beyond the capacity with the append.
  expect_refused("cache_seqlens[0] is -1", [&](KvCacheCase& b, AttentionArgs& a) {
    b.cache_seqlens[0] = -1;
    a.cache_seqlens = b.cache_seqlens.data();
  });
  expect_refused("cache_seqlens[1] is 32 (+ 1 appended)", [&](KvCacheCase& b, AttentionArgs& a) {
    b.cache_seqlens[1] = 32;
    a.cache_seqlens = b.cache_seqlens.data();
  });
  // Missing tables.
  expect_refused("cache_seqlens",
                 [&](KvCacheCase&, AttentionArgs& a) { a.cache_seqlens = nullptr; });
  expect_refused("block_table", [&](KvCacheCase&, AttentionArgs& a) { a.block_table = nullptr; });
  expect_refused("k_new", [&](KvCacheCase&, AttentionArgs& a) { a.k_new = nullptr; });
  // Shapes: a page size that is not a power of two, a capacity that is
  // not the pages', fields of a cache without kv_cache.
  expect_refused("page_size is 24",
                 [&](KvCacheCase&, AttentionArgs& a) { a.problem.page_size = 24; });
  expect_refused("seqlen_k is 31",
                 [&](KvCacheCase&, AttentionArgs& a) { a.problem.seqlen_k = 31; });
  expect_refused("num_pages is 0",
                 [&](KvCacheCase&, AttentionArgs& a) { a.problem.num_pages = 0; });
  expect_refused("append is set but kv_cache is not",
                 [&](KvCacheCase&, AttentionArgs& a) { a.problem.kv_cache = false; });
}

// A kernel without K/V caches refuses the problem by name.
TEST(KvCacheCpuValidation, KernelsWithoutTheCapabilityRefuse) {
  const KvCacheCase c = MakeKvCacheCase(
      KvSpec("capability", KvHeads(8, 2, 64), {5}, {1}, 0, 32, false), DType::kBFloat16, 9);
  KernelInfo kernel = *FindKernel(kCpuKernelName);
  EXPECT_TRUE(kernel.caps.kv_cache);
  EXPECT_TRUE(ValidateProblem(c.problem, kernel).ok());
  kernel.caps.kv_cache = false;
  const absl::Status st = ValidateProblem(c.problem, kernel);
  EXPECT_EQ(st.code(), absl::StatusCode::kInvalidArgument) << st;
  EXPECT_NE(st.message().find("kv_cache is set"), std::string::npos) << st;
}

}  // namespace
}  // namespace attn
