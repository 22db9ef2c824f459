// flash_fwd on K/V cache problems (flash_attn_with_kvcache's surface): dense
// and paged caches, page sizes 16…256 with pages in random order and
// prefix pages shared between sequences, cache lengths per sequence from 0
// across page edges to 131071, appends that cross a page, Sq 1…16 and
// prefill chunks, GQA 1…8 and MQA, every head_dim, windows, LSE, varlen
// queries with empty sequences; every split count forced. The reference is
// the float32 GPU reference on the same attention over keys gathered out
// of the expected cache on the host (tests/kernels/kv_cache_case.h), so it
// shares nothing with the kernel's paging; the cache after the call must be
// exactly the expected one. Outputs, LSE and workspace NaN-poisoned before
// each run; cache rows nobody has are NaN. Tables the kernel is not
// protected from (no host copies): a page out of range or a length past
// the capacity reads and writes nothing outside the cache (memcheck runs
// SanitizerSweep.KvCacheVariants).
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "absl/strings/str_cat.h"
#include "attn/attention.h"
#include "attn/gpu_reference.h"
#include "cuda_test_util.h"
#include "kv_cache_case.h"
#include "test_util.h"

namespace attn {
namespace {

using testing::DeviceBuffer;
using testing::FreshSeed;
using testing::KvCacheCase;
using testing::KvCacheSpec;
using testing::KvHeads;
using testing::KvSpec;
using testing::MakeKvCacheCase;

std::unique_ptr<DeviceBuffer> Upload(const std::vector<uint16_t>& host) {
  return std::make_unique<DeviceBuffer>(host);
}
std::unique_ptr<DeviceBuffer> Upload(const std::vector<int32_t>& host) {
  return std::make_unique<DeviceBuffer>(host);
}

// One case on the device: its inputs, the reference, the buffers a run writes.
class DeviceKvCase {
 public:
  DeviceKvCase(KvCacheCase c, DType dtype) : c_(std::move(c)), dtype_(dtype) {}

  const KvCacheCase& host() const { return c_; }
  std::string Describe() const { return c_.Describe(dtype_); }

  void Prepare() {
    const AttentionProblem& p = c_.problem;
    q_ = Upload(c_.q);
    k_ = Upload(c_.k_cache);
    v_ = Upload(c_.v_cache);
    cache_seqlens_ = Upload(c_.cache_seqlens);
    block_table_ = Upload(c_.block_table);
    cu_q_ = Upload(c_.cu_seqlens_q);
    k_new_ = Upload(c_.k_new);
    v_new_ = Upload(c_.v_new);
    out_ = std::make_unique<DeviceBuffer>(p.QBytes(dtype_));
    lse_ = std::make_unique<DeviceBuffer>(p.QTokens() * p.heads_q * sizeof(float));
    for (const auto* b : {&q_, &k_, &v_, &cache_seqlens_, &block_table_, &cu_q_, &k_new_, &v_new_,
                          &out_, &lse_}) {
      ASSERT_NE((*b)->get(), nullptr) << "device allocation";
    }
    // The reference: the gathered varlen problem.
    const AttentionProblem& g = c_.gathered;
    DeviceBuffer gk(c_.gathered_k), gv(c_.gathered_v), gcu_q(c_.gathered_cu_q),
        gcu_k(c_.gathered_cu_k), ref(g.QElements() * sizeof(float)),
        ref_lse(g.QTokens() * g.heads_q * sizeof(float));
    AttentionArgs args =
        AttentionArgs::Contiguous(g, dtype_, q_->get(), gk.get(), gv.get(), out_->get());
    args.cu_seqlens_q = static_cast<const int32_t*>(gcu_q.get());
    args.cu_seqlens_k = static_cast<const int32_t*>(gcu_k.get());
    const absl::Status st = AttentionGpuReference(args, static_cast<float*>(ref.get()), nullptr,
                                                  static_cast<float*>(ref_lse.get()));
    ASSERT_TRUE(st.ok()) << st;
    ATTN_ASSERT_CUDA(cudaDeviceSynchronize());
    const std::vector<float> out = ref.ToHost<float>(), lse = ref_lse.ToHost<float>();
    ref_out_.assign(out.begin(), out.end());
    gathered_lse_.assign(lse.begin(), lse.end());
    ref_lse_ = c_.LseInProblemLayout(gathered_lse_);
  }

  AttentionArgs Args() const {
    const AttentionProblem& p = c_.problem;
    AttentionArgs args = AttentionArgs::Contiguous(
        p, dtype_, q_->get(), k_->get(), v_->get(), out_->get(),
        p.return_lse ? static_cast<float*>(lse_->get()) : nullptr);
    args.cache_seqlens = static_cast<const int32_t*>(cache_seqlens_->get());
    if (p.Paged()) args.block_table = static_cast<const int32_t*>(block_table_->get());
    if (p.varlen) args.cu_seqlens_q = static_cast<const int32_t*>(cu_q_->get());
    if (p.append) {
      args.k_new = k_new_->get();
      args.v_new = v_new_->get();
    }
    return args;
  }

  // Restores the cache, poisons everything the kernel writes, runs with
  // `num_splits` (a workspace for it, or for the kernel's choice with 0),
  // and checks the output, the LSE, rows without keys and the cache.
  void Check(const KernelHandle& kernel, int num_splits) {
    const AttentionProblem& p = c_.problem;
    SCOPED_TRACE(Describe() + absl::StrCat(" num_splits=", num_splits));
    ATTN_ASSERT_CUDA(cudaMemcpy(k_->get(), c_.k_cache.data(), k_->bytes(), cudaMemcpyHostToDevice));
    ATTN_ASSERT_CUDA(cudaMemcpy(v_->get(), c_.v_cache.data(), v_->bytes(), cudaMemcpyHostToDevice));
    ATTN_ASSERT_CUDA(cudaMemset(out_->get(), 0xff, out_->bytes()));
    ATTN_ASSERT_CUDA(cudaMemset(lse_->get(), 0xff, lse_->bytes()));
    AttentionArgs args = Args();
    const int64_t bytes = std::max<int64_t>(
        {SplitKvWorkspaceBytes(p, num_splits), kernel.WorkspaceBytes(p), 16});
    DeviceBuffer workspace(bytes);
    ASSERT_NE(workspace.get(), nullptr);
    ATTN_ASSERT_CUDA(cudaMemset(workspace.get(), 0xff, bytes));
    args.workspace = workspace.get();
    args.workspace_bytes = bytes;
    args.num_splits = num_splits;
    const absl::Status st = kernel.Run(args, nullptr);
    ASSERT_TRUE(st.ok()) << st;
    ATTN_ASSERT_CUDA(cudaDeviceSynchronize());
    EXPECT_TRUE(k_->ToHost<uint16_t>() == c_.k_cache_after) << "K cache after the call";
    EXPECT_TRUE(v_->ToHost<uint16_t>() == c_.v_cache_after) << "V cache after the call";
    const std::vector<uint16_t> out = out_->ToHost<uint16_t>();
    EXPECT_EQ(testing::CountNonFinite(out, dtype_), 0) << "unwritten or non-finite outputs";
    const double err = testing::RelativeL2Error(out, dtype_, ref_out_);
    EXPECT_LT(err, dtype_ == DType::kBFloat16 ? 1e-2 : 5e-3);
    double lse_err = 0.0;
    if (p.return_lse) {
      lse_err = testing::MaxLseError(lse_->ToHost<float>(), ref_lse_);
      EXPECT_LT(lse_err, 1e-3) << "LSE (a row that sees no key must be exactly -inf)";
    }
    const int64_t total = p.QTokens(), heads = p.heads_q, d = p.head_dim;
    int64_t nonzero_empty = 0;
    for (int64_t row = 0; row < total; ++row) {
      for (int64_t h = 0; h < heads; ++h) {
        if (!std::isinf(gathered_lse_[h * total + row])) continue;
        for (int64_t i = 0; i < d; ++i) {
          nonzero_empty += BitsToFloat(out[(row * heads + h) * d + i], dtype_) != 0.0f;
        }
      }
    }
    EXPECT_EQ(nonzero_empty, 0) << "elements of rows that see no key";
    std::printf("  %s splits %d rel_err %.2e lse_err %.1e\n", Describe().c_str(), num_splits, err,
                lse_err);
  }

  // Device copies of the tables, for tests that spoil them.
  DeviceBuffer& cache_seqlens() { return *cache_seqlens_; }
  DeviceBuffer& block_table() { return *block_table_; }
  DeviceBuffer& k() { return *k_; }
  DeviceBuffer& v() { return *v_; }
  DeviceBuffer& out() { return *out_; }

 private:
  KvCacheCase c_;
  DType dtype_;
  std::unique_ptr<DeviceBuffer> q_, k_, v_, cache_seqlens_, block_table_, cu_q_, k_new_, v_new_,
      out_, lse_;
  std::vector<double> ref_out_, ref_lse_, gathered_lse_;
};

std::vector<KvCacheSpec> FeatureSpecs() {
  std::vector<KvCacheSpec> specs;
  // Dense caches, decode, across the decode tile's key blocks (32).
  specs.push_back(KvSpec("dense decode", KvHeads(32, 8, 128), {1, 31, 32, 33, 1000, 8192},
                       {1, 1, 1, 1, 1, 1}, 0, 8192, false));
  specs.push_back(KvSpec("dense decode append", KvHeads(32, 8, 128), {0, 31, 32, 8191}, {1, 1, 1, 1}, 0,
                       8192, true));
  // Every page size, lengths at page edges ±1, decode with append.
  for (int64_t ps : {16, 32, 64, 128, 256}) {
    const int32_t e = static_cast<int32_t>(ps);
    specs.push_back(KvSpec(absl::StrCat("paged ", ps, " decode append"), KvHeads(32, 8, 128),
                         {e - 1, e, e + 1, 3 * e + 5, 0}, {1, 1, 1, 1, 1}, ps, 4 * ps + 64, true));
  }
  // Appends that cross a page, speculative rows.
  specs.push_back(KvSpec("paged 16 speculative append crossing", KvHeads(16, 4, 128), {14, 30, 0, 11},
                       {5, 5, 5, 5}, 16, 64, true));
  specs.push_back(
      KvSpec("paged 32 Sq=16 append", KvHeads(8, 2, 128), {100, 17}, {16, 16}, 32, 160, true));
  // GQA ratios 1, 2, 4, 8 and MQA.
  for (int64_t heads_kv : {16, 8, 4, 2, 1}) {
    specs.push_back(KvSpec(absl::StrCat("paged 64 GQA 16/", heads_kv), KvHeads(16, heads_kv, 128),
                         {500, 64, 3}, {3, 3, 3}, 64, 576, true));
  }
  // Every head_dim.
  for (int64_t d : {64, 96, 128, 192, 256}) {
    specs.push_back(KvSpec(absl::StrCat("paged 32 D=", d), KvHeads(8, 2, d), {700, 1, 95}, {1, 1, 1},
                         32, 736, true));
    specs.push_back(KvSpec(absl::StrCat("paged 16 varlen D=", d), KvHeads(8, 2, d), {33, 0, 200},
                         {4, 1, 2}, 16, 224, true, true));
  }
  // Windows; no LSE with a scale of our own; no append.
  AttentionProblem window = KvHeads(8, 2, 128);
  window.window_left = 100;
  specs.push_back(KvSpec("paged 16 window", window, {2000, 90}, {4, 4}, 16, 2048, true));
  AttentionProblem two_sided = KvHeads(8, 8, 64, false);
  two_sided.window_left = 30;
  two_sided.window_right = 2;
  specs.push_back(KvSpec("paged 64 window both sides", two_sided, {300, 5}, {3, 3}, 64, 320, false));
  AttentionProblem plain = KvHeads(8, 1, 128, false);
  plain.softmax_scale = 0.3f;
  plain.return_lse = false;
  specs.push_back(KvSpec("dense no LSE scale 0.3", plain, {3000, 1}, {2, 2}, 0, 3072, true));
  // Varlen: decode rows, prefill chunks (longer than the packed tile) and
  // an empty sequence (no cache, no new tokens) in one batch.
  specs.push_back(KvSpec("paged 64 varlen mixed", KvHeads(32, 8, 128), {5000, 0, 37, 100, 1},
                       {1, 0, 16, 40, 1}, 64, 5120, true, true));
  specs.push_back(KvSpec("dense varlen prefill chunks", KvHeads(8, 2, 64), {0, 300}, {130, 64}, 0, 512,
                       true, true));
  // Shared prefix pages (read-only), with and without appends.
  specs.push_back(KvSpec("paged 16 shared prefix", KvHeads(32, 8, 128), {500, 700, 300}, {1, 1, 1}, 16,
                       768, false, false, true));
  specs.push_back(KvSpec("paged 32 shared prefix append", KvHeads(16, 4, 128), {500, 700, 300},
                       {2, 2, 2}, 32, 768, true, false, true));
  // The smallest: the appended token is the only key; one cached key.
  specs.push_back(KvSpec("dense Sk=1 append", KvHeads(8, 2, 128), {0}, {1}, 0, 1, true));
  specs.push_back(KvSpec("paged 16 Sk=1", KvHeads(8, 2, 128), {1}, {1}, 16, 16, false));
  // One long sequence: 131071 cached + 1 appended.
  specs.push_back(
      KvSpec("paged 256 Sk=131072 MQA", KvHeads(8, 1, 64), {131071}, {1}, 256, 131072, true));
  return specs;
}

class KvCacheGpuTest : public ::testing::TestWithParam<DType> {
 protected:
  void SetUp() override { ATTN_SKIP_WITHOUT_GPU(); }
};

TEST_P(KvCacheGpuTest, MatchesTheReferenceOverTheGatheredKeys) {
  const absl::StatusOr<KernelHandle> kernel = ResolveKernel(kProductionKernelName);
  ASSERT_TRUE(kernel.ok()) << kernel.status();
  ASSERT_TRUE(kernel->info().caps.kv_cache);
  int runs = 0;
  const std::vector<KvCacheSpec> specs = FeatureSpecs();
  for (const KvCacheSpec& spec : specs) {
    DeviceKvCase device(MakeKvCacheCase(spec, GetParam(), FreshSeed()), GetParam());
    ASSERT_NO_FATAL_FAILURE(device.Prepare());
    for (int splits : {0, 1, 2, 3, 7, kMaxSplits}) {
      ASSERT_NO_FATAL_FAILURE(device.Check(*kernel, splits));
      ++runs;
    }
  }
  EXPECT_EQ(runs, static_cast<int>(specs.size()) * 6);
}

// Device tables without host copies are not checked (that would need a
// copy back per call); a bad entry must still stay inside the cache: a used
// page out of range reads zeros and is not written, a length past the
// capacity is clamped to it. Everything else of the cache is as expected.
void CheckBadDeviceTablesStayInsideTheCache(DType dtype) {
  const absl::StatusOr<KernelHandle> kernel = ResolveKernel(kProductionKernelName);
  ASSERT_TRUE(kernel.ok()) << kernel.status();
  DeviceKvCase device(
      MakeKvCacheCase(KvSpec("bad tables", KvHeads(8, 2, 128), {40, 20}, {2, 2}, 16, 64, true), dtype,
                      FreshSeed()),
      dtype);
  ASSERT_NO_FATAL_FAILURE(device.Prepare());
  const KvCacheCase& c = device.host();
  // Sequence 1's second page (its tokens 16..21, the append included) out
  // of range; sequence 0's length past the capacity.
  std::vector<int32_t> table = c.block_table;
  table[1 * c.problem.max_pages_per_seq + 1] = 1 << 30;
  ATTN_ASSERT_CUDA(cudaMemcpy(device.block_table().get(), table.data(), table.size() * 4,
                              cudaMemcpyHostToDevice));
  const std::vector<int32_t> lengths = {1000, 20};
  ATTN_ASSERT_CUDA(cudaMemcpy(device.cache_seqlens().get(), lengths.data(), 8,
                              cudaMemcpyHostToDevice));
  ATTN_ASSERT_CUDA(cudaMemset(device.out().get(), 0xff, device.out().bytes()));
  AttentionArgs args = device.Args();
  const absl::Status st = kernel->Run(args, nullptr);
  ASSERT_TRUE(st.ok()) << st;
  ATTN_ASSERT_CUDA(cudaDeviceSynchronize());
  // Nothing was appended (sequence 0's positions are past the capacity,
  // sequence 1's page is out of range): the cache is unchanged.
  EXPECT_TRUE(device.k().ToHost<uint16_t>() == c.k_cache) << "K cache written";
  EXPECT_TRUE(device.v().ToHost<uint16_t>() == c.v_cache) << "V cache written";
}

TEST_P(KvCacheGpuTest, BadDeviceTablesStayInsideTheCache) {
  CheckBadDeviceTablesStayInsideTheCache(GetParam());
}

INSTANTIATE_TEST_SUITE_P(AllDTypes, KvCacheGpuTest,
                         ::testing::Values(DType::kFloat16, DType::kBFloat16),
                         [](const auto& param_info) {
                           return std::string(DTypeName(param_info.param));
                         });

// For compute-sanitizer (bench/run_compute_sanitizer.sh): every head_dim's
// decode tile on a paged cache read row by row (page 16, varlen, append)
// and page by page (page 64), a dense cache, split and not, then bad
// tables.
TEST(SanitizerSweep, KvCacheVariants) {
  ATTN_SKIP_WITHOUT_GPU();
  const absl::StatusOr<KernelHandle> kernel = ResolveKernel(kProductionKernelName);
  ASSERT_TRUE(kernel.ok()) << kernel.status();
  int runs = 0;
  for (DType dtype : {DType::kFloat16, DType::kBFloat16}) {
    for (int64_t d : {64, 96, 128, 192, 256}) {
      for (const KvCacheSpec& spec :
           {KvSpec("sweep paged 16 varlen append", KvHeads(4, 2, d), {20, 0}, {3, 1}, 16, 48, true, true),
            KvSpec("sweep paged 64 append", KvHeads(4, 1, d), {70, 1}, {1, 1}, 64, 128, true),
            KvSpec("sweep dense", KvHeads(4, 4, d, false), {50, 3}, {2, 2}, 0, 64, false)}) {
        DeviceKvCase device(MakeKvCacheCase(spec, dtype, FreshSeed()), dtype);
        ASSERT_NO_FATAL_FAILURE(device.Prepare());
        for (int splits : {1, 3}) {
          ASSERT_NO_FATAL_FAILURE(device.Check(*kernel, splits));
          ++runs;
          std::fflush(stdout);
        }
      }
    }
  }
  for (DType dtype : {DType::kFloat16, DType::kBFloat16}) {
    ASSERT_NO_FATAL_FAILURE(CheckBadDeviceTablesStayInsideTheCache(dtype));
    ++runs;
  }
  std::printf("sanitizer sweep: K/V cache, %d runs\n", runs);
}

}  // namespace
}  // namespace attn
