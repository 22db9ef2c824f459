// The CPU kernels (cpu_flash, the service's CPU backend, and cpu_reference)
// against naive float64, over every
// feature of attn/problem.h: lengths 1..1000, seqlen_q != seqlen_k with and
// without causal, GQA/MQA, head dims 8..512, sliding windows, varlen batches
// (empty sequences included), LSE, strided tensors, fully masked rows.
// Outputs and LSE are poisoned with NaN first, so an unwritten element fails.
#include "attn/cpu_reference.h"

#include <gtest/gtest.h>

#include <atomic>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <string>
#include <tuple>
#include <vector>

#include "attn/attention.h"
#include "attn/cpu_kernels.h"
#include "test_util.h"

namespace attn {
namespace {

using testing::CountNonFinite;
using testing::DenseProblem;
using testing::Describe;
using testing::FreshSeed;
using testing::kPoisonBits;
using testing::MakeProblemInputs;
using testing::MaxLseError;
using testing::ProblemInputs;
using testing::RelativeL2Error;
using testing::SetVarlen;
using testing::TensorLayout;

constexpr uint16_t kPaddingBits = 0x7ffe;  // another NaN: padding between strided elements
const float kLsePoison = std::numeric_limits<float>::quiet_NaN();

AttentionProblem Causal(AttentionProblem p) {
  p.causal = true;
  return p;
}

AttentionProblem Window(AttentionProblem p, int64_t left, int64_t right) {
  p.window_left = left;
  p.window_right = right;
  return p;
}

struct Case {
  std::string name;
  AttentionProblem problem;
  std::vector<int32_t> cu_q, cu_k;  // varlen
  bool strided = false;
};

Case Make(std::string name, AttentionProblem p, bool strided = false) {
  return {std::move(name), p, {}, {}, strided};
}

Case Varlen(std::string name, AttentionProblem p, const std::vector<int32_t>& q_lens,
            const std::vector<int32_t>& k_lens, bool strided = false) {
  Case c{std::move(name), p, {}, {}, strided};
  SetVarlen(&c.problem, q_lens, k_lens, &c.cu_q, &c.cu_k);
  return c;
}

// The result of one CPU run, dense.
struct CpuRun {
  std::vector<uint16_t> out;
  std::vector<float> lse;
  absl::Status status;
};

// Runs CPU kernel `kernel` on `in` (through Forward, or with `threads` > 0
// on a pool of that many), strided when asked, with poisoned outputs;
// expects every padding element untouched.
CpuRun RunCpu(const std::string& kernel, const ProblemInputs& in, bool strided, int threads = 0) {
  const AttentionProblem& p = in.problem;
  CpuRun run;
  std::vector<float> lse(p.return_lse ? p.LseElements() : 0, kLsePoison);
  AttentionArgs args = AttentionArgs::Contiguous(p, in.dtype, nullptr, nullptr, nullptr, nullptr,
                                                 p.return_lse ? lse.data() : nullptr);
  if (p.varlen) {
    args.cu_seqlens_q = in.cu_seqlens_q.data();
    args.cu_seqlens_k = in.cu_seqlens_k.data();
  }
  // Odd padding: the CPU kernel has no alignment rules.
  const TensorLayout q_layout = TensorLayout::ForQ(p, strided ? 3 : 0);
  const TensorLayout kv_layout = TensorLayout::ForKV(p, strided ? 3 : 0);
  // Input padding is NaN too: a kernel that reads it produces NaN.
  const std::vector<uint16_t> q = q_layout.Scatter(in.q, kPaddingBits);
  const std::vector<uint16_t> k = kv_layout.Scatter(in.k, kPaddingBits);
  const std::vector<uint16_t> v = kv_layout.Scatter(in.v, kPaddingBits);
  std::vector<uint16_t> out(q_layout.Elements(), kPoisonBits);
  if (strided) {
    // Output padding keeps its own NaN, so untouched padding is told apart.
    out = q_layout.Scatter(std::vector<uint16_t>(p.QElements(), kPoisonBits), kPaddingBits);
    args.q_strides = args.out_strides = q_layout.strides;
    args.k_strides = args.v_strides = kv_layout.strides;
  }
  args.q = q.data();
  args.k = k.data();
  args.v = v.data();
  args.out = out.data();
  if (threads == 0) {
    run.status = Forward(args, kernel);
  } else {
    run.status = ValidateArgs(args, *FindKernel(kernel));
    CpuThreadPool pool(threads);
    if (run.status.ok()) EXPECT_TRUE(RunCpuKernel(kernel, args, pool));
  }
  if (strided) {
    EXPECT_EQ(q_layout.CountPaddingNot(out, kPaddingBits), 0) << "padding written";
  }
  run.out = q_layout.Gather(out);
  run.lse = std::move(lse);
  return run;
}

// The tolerances: output rounding alone costs ~2^-9 (bf16) or ~2^-12 (fp16)
// relative; the LSE is float32 over exactly quantised inputs.
double OutputTolerance(DType dtype) { return dtype == DType::kBFloat16 ? 5e-3 : 1e-3; }
constexpr double kLseTolerance = 1e-4;

// Runs one case and checks every element against float64.
void CheckCase(const std::string& kernel, const Case& c, DType dtype) {
  const ProblemInputs in = MakeProblemInputs(c.problem, dtype, FreshSeed(), c.cu_q, c.cu_k);
  SCOPED_TRACE(kernel + " " + c.name + (c.strided ? " (strided) " : " ") + Describe(in));
  const CpuRun run = RunCpu(kernel, in, c.strided);
  ASSERT_TRUE(run.status.ok()) << run.status;
  std::vector<double> ref_lse;
  const std::vector<double> ref =
      AttentionNaiveF64(in.problem, in.q_float.data(), in.k_float.data(), in.v_float.data(),
                        in.cu_seqlens_q.data(), in.cu_seqlens_k.data(), &ref_lse);
  EXPECT_EQ(CountNonFinite(run.out, dtype), 0) << "unwritten or non-finite outputs";
  EXPECT_LT(RelativeL2Error(run.out, dtype, ref), OutputTolerance(dtype));
  if (c.problem.return_lse) {
    EXPECT_LT(MaxLseError(run.lse, ref_lse), kLseTolerance);
  }
  // Rows that see no key: exactly 0.
  const AttentionProblem& p = in.problem;
  for (int64_t b = 0, row = 0; b < p.batch; ++b) {
    const int64_t sq = p.varlen ? in.cu_seqlens_q[b + 1] - in.cu_seqlens_q[b] : p.seqlen_q;
    for (int64_t i = 0; i < sq; ++i, ++row) {
      for (int64_t h = 0; h < p.heads_q; ++h) {
        const int64_t lse_index = p.varlen ? h * p.total_q + row : (b * p.heads_q + h) * sq + i;
        if (!std::isinf(ref_lse[lse_index])) continue;
        for (int64_t d = 0; d < p.head_dim; ++d) {
          ASSERT_EQ(BitsToFloat(run.out[(row * p.heads_q + h) * p.head_dim + d], dtype), 0.0f)
              << "row " << row << " head " << h << " sees no key";
        }
      }
    }
  }
}

std::vector<Case> FeatureCases() {
  std::vector<Case> cases = {
      // Lengths, self-attention.
      Make("S=1", DenseProblem(2, 1, 1, 2, 2, 64)),
      Make("S=7", DenseProblem(3, 7, 7, 2, 2, 64)),
      Make("S=100", DenseProblem(2, 100, 100, 2, 2, 64)),
      Make("S=1000", DenseProblem(1, 1000, 1000, 2, 2, 64)),
      Make("S=7 causal", Causal(DenseProblem(2, 7, 7, 2, 2, 64))),
      Make("S=100 causal", Causal(DenseProblem(2, 100, 100, 2, 2, 64))),
      Make("S=1000 causal", Causal(DenseProblem(1, 1000, 1000, 2, 2, 64))),
      // Decode: one query.
      Make("decode Sk=1", DenseProblem(2, 1, 1, 8, 1, 64)),
      Make("decode Sk=7", DenseProblem(2, 1, 7, 8, 2, 128)),
      Make("decode Sk=1000 causal", Causal(DenseProblem(2, 1, 1000, 8, 1, 128))),
      Make("decode Sk=1000 window", Causal(Window(DenseProblem(1, 1, 1000, 4, 4, 64), 100, 0))),
      // seqlen_q != seqlen_k.
      Make("Sq>Sk", DenseProblem(2, 100, 7, 2, 1, 64)),
      Make("Sq<Sk", DenseProblem(2, 7, 1000, 2, 1, 64)),
      Make("Sq>Sk causal", Causal(DenseProblem(2, 100, 7, 2, 2, 64))),  // 93 rows see nothing
      Make("Sq>Sk causal long", Causal(DenseProblem(1, 1000, 100, 2, 1, 64))),
      Make("Sq=7 Sk=1 causal", Causal(DenseProblem(2, 7, 1, 2, 2, 64))),
      Make("Sq<Sk causal", Causal(DenseProblem(2, 7, 100, 2, 2, 64))),
      Make("Sq<Sk causal long", Causal(DenseProblem(1, 100, 1000, 2, 2, 64))),
      // GQA ratios 1, 2, 4, 8 and MQA.
      Make("GQA 1", DenseProblem(1, 100, 100, 8, 8, 64)),
      Make("GQA 2", Causal(DenseProblem(1, 100, 100, 8, 4, 64))),
      Make("GQA 4", DenseProblem(2, 100, 70, 8, 2, 64)),
      Make("GQA 8", Causal(DenseProblem(1, 100, 130, 16, 2, 64))),
      Make("MQA", DenseProblem(1, 100, 100, 8, 1, 64)),
      // Head dims.
      Make("D=64", DenseProblem(1, 100, 77, 2, 1, 64)),
      Make("D=96", Causal(DenseProblem(1, 100, 77, 2, 1, 96))),
      Make("D=128", DenseProblem(1, 100, 77, 2, 1, 128)),
      Make("D=192", Causal(DenseProblem(1, 77, 100, 2, 1, 192))),
      Make("D=256", DenseProblem(1, 100, 77, 2, 1, 256)),
      Make("D=8", DenseProblem(1, 20, 20, 2, 2, 8)),
      Make("D=40", Causal(DenseProblem(1, 20, 33, 2, 2, 40))),
      Make("D=512", DenseProblem(1, 20, 20, 1, 1, 512)),
      // Sliding windows.
      Make("window left", Window(DenseProblem(1, 300, 300, 2, 2, 64), 16, -1)),
      Make("window right", Window(DenseProblem(1, 300, 300, 2, 2, 64), -1, 16)),
      Make("window 0,0", Window(DenseProblem(1, 300, 300, 2, 2, 64), 0, 0)),
      Make("window 32,8", Window(DenseProblem(1, 300, 300, 2, 1, 64), 32, 8)),
      Make("window causal", Causal(Window(DenseProblem(1, 300, 300, 2, 2, 64), 20, -1))),
      Make("window Sq<Sk", Window(DenseProblem(2, 50, 200, 2, 2, 64), 10, 10)),
      Make("window Sq>Sk", Window(DenseProblem(2, 200, 50, 2, 2, 64), 5, 0)),  // empty rows
      Make("window Sq>Sk 0,0", Window(DenseProblem(1, 100, 30, 2, 2, 64), 0, 0)),
      // Varlen, empty sequences included.
      Varlen("varlen", DenseProblem(0, 0, 0, 4, 2, 64), {1, 7, 100, 0, 300, 4},
             {5, 7, 130, 20, 1, 0}),
      Varlen("varlen causal MQA", Causal(DenseProblem(0, 0, 0, 8, 1, 128)), {1, 7, 100, 0, 300, 4},
             {5, 7, 130, 20, 1, 0}),
      Varlen("varlen window", Window(DenseProblem(0, 0, 0, 2, 2, 96), 10, 3), {50, 7, 100},
             {60, 1, 90}),
      Varlen("varlen long causal", Causal(DenseProblem(0, 0, 0, 2, 1, 64)), {1000, 1, 33},
             {1000, 1000, 20}),
      Varlen("varlen single", DenseProblem(0, 0, 0, 2, 2, 64), {13}, {29}),
      // Strided tensors.
      Make("strided", DenseProblem(2, 100, 100, 4, 4, 64), /*strided=*/true),
      Make("strided GQA causal", Causal(DenseProblem(2, 50, 80, 4, 2, 96)), true),
      Varlen("strided varlen", Causal(DenseProblem(0, 0, 0, 4, 2, 64)), {30, 0, 70}, {50, 5, 40},
             true),
  };
  // A scale of our own, and no LSE asked for.
  AttentionProblem scaled = Causal(DenseProblem(1, 100, 100, 2, 2, 64));
  scaled.softmax_scale = 0.3f;
  cases.push_back(Make("scale 0.3", scaled));
  AttentionProblem no_lse = DenseProblem(2, 50, 60, 2, 1, 64);
  no_lse.return_lse = false;
  cases.push_back(Make("no LSE", no_lse));
  return cases;
}

// Parameters: the kernel's name and the dtype. "cpu_flash_f32" is cpu_flash
// with its products forced to f32 (ATTN_CPU_FLASH_F32=1): the path of hosts
// without 16-bit matmuls, tested on any host.
constexpr char kFlashF32[] = "cpu_flash_f32";
class CpuReferenceTest : public ::testing::TestWithParam<std::tuple<std::string, DType>> {
 protected:
  void SetUp() override {
    if (std::get<0>(GetParam()) == kFlashF32) setenv("ATTN_CPU_FLASH_F32", "1", 1);
  }
  void TearDown() override { unsetenv("ATTN_CPU_FLASH_F32"); }
  std::string Kernel() const {
    return std::get<0>(GetParam()) == kFlashF32 ? kCpuFlashKernelName : std::get<0>(GetParam());
  }
  DType Dtype() const { return std::get<1>(GetParam()); }
};

TEST_P(CpuReferenceTest, EveryFeatureMatchesFloat64) {
  for (const Case& c : FeatureCases()) CheckCase(Kernel(), c, Dtype());
}

// The seed's dense self-attention, through the Shape overload of the
// float64 reference.
TEST_P(CpuReferenceTest, SelfAttentionMatchesShapeReference) {
  const Shape shape{2, 97, 3, 128};
  const testing::HostInputs in = testing::MakeRandomInputs(shape, Dtype(), FreshSeed());
  std::vector<uint16_t> out(in.q.size(), kPoisonBits);
  const AttentionProblem p = AttentionProblem::SelfAttention(2, 97, 3, 128);
  ASSERT_TRUE(Forward(AttentionArgs::Contiguous(p, in.dtype, in.q.data(), in.k.data(), in.v.data(),
                                                out.data()),
                      Kernel())
                  .ok());
  const std::vector<double> ref = AttentionNaiveF64(in.q_float.data(), in.k_float.data(),
                                                    in.v_float.data(), shape, p.ResolvedScale());
  EXPECT_EQ(CountNonFinite(out, in.dtype), 0) << testing::Describe(in);
  EXPECT_LT(RelativeL2Error(out, in.dtype, ref), OutputTolerance(in.dtype))
      << testing::Describe(in);
}

// Work is split by rows, so the thread count must not change a single bit.
TEST_P(CpuReferenceTest, ThreadCountDoesNotChangeResult) {
  Case c = Varlen("", Causal(Window(DenseProblem(0, 0, 0, 4, 2, 64), 50, -1)), {300, 1, 150},
                  {300, 7, 200});
  const ProblemInputs in = MakeProblemInputs(c.problem, Dtype(), FreshSeed(), c.cu_q, c.cu_k);
  const CpuRun one = RunCpu(Kernel(), in, false, 1);
  const CpuRun many = RunCpu(Kernel(), in, false, 7);
  ASSERT_TRUE(one.status.ok()) << one.status;
  EXPECT_EQ(one.out, many.out) << Describe(in);
  ASSERT_EQ(one.lse.size(), many.lse.size());
  for (size_t i = 0; i < one.lse.size(); ++i) {
    ASSERT_EQ(std::memcmp(&one.lse[i], &many.lse[i], sizeof(float)), 0) << i << " " << Describe(in);
  }
}

// A large scale makes the softmax nearly one-hot: the online rescaling must
// neither overflow nor lose the maximum.
TEST_P(CpuReferenceTest, StableUnderLargeScores) {
  AttentionProblem p = Causal(DenseProblem(1, 200, 300, 2, 1, 64));
  p.softmax_scale = 40.0f;
  const ProblemInputs in = MakeProblemInputs(p, Dtype(), FreshSeed());
  const CpuRun run = RunCpu(Kernel(), in, false);
  ASSERT_TRUE(run.status.ok()) << run.status;
  std::vector<double> ref_lse;
  const std::vector<double> ref = AttentionNaiveF64(p, in.q_float.data(), in.k_float.data(),
                                                    in.v_float.data(), nullptr, nullptr, &ref_lse);
  EXPECT_EQ(CountNonFinite(run.out, in.dtype), 0) << Describe(in);
  EXPECT_LT(RelativeL2Error(run.out, in.dtype, ref), 1e-2) << Describe(in);
  // LSE values are ~40× larger here; relative float32 error.
  EXPECT_LT(MaxLseError(run.lse, ref_lse), 1e-2) << Describe(in);
}

// A row that sees no key: output exactly 0 and LSE exactly -inf, and the
// float64 reference agrees.
TEST_P(CpuReferenceTest, RowsWithoutKeysAreZeroWithMinusInfLse) {
  const AttentionProblem p = Causal(DenseProblem(1, 10, 4, 1, 1, 8));  // rows 0..5 see nothing
  const ProblemInputs in = MakeProblemInputs(p, Dtype(), FreshSeed());
  const CpuRun run = RunCpu(Kernel(), in, false);
  ASSERT_TRUE(run.status.ok()) << run.status;
  std::vector<double> ref_lse;
  AttentionNaiveF64(p, in.q_float.data(), in.k_float.data(), in.v_float.data(), nullptr, nullptr,
                    &ref_lse);
  for (int64_t i = 0; i < 10; ++i) {
    const bool empty = i < 6;
    EXPECT_EQ(std::isinf(run.lse[i]) && run.lse[i] < 0, empty) << "row " << i;
    EXPECT_EQ(std::isinf(ref_lse[i]) && ref_lse[i] < 0, empty) << "row " << i;
    for (int64_t d = 0; d < 8; ++d) {
      if (empty) {
        EXPECT_EQ(run.out[i * 8 + d], 0) << "row " << i;  // +0.0
      }
    }
  }
}

// The cancellation hook: read before every task, so a flag already set stops
// the call before any row is written; an unset flag changes nothing.
TEST_P(CpuReferenceTest, StopsBetweenTasksWhenCancelled) {
  const AttentionProblem p = DenseProblem(2, 200, 200, 2, 2, 64);  // 8 or 16 tasks
  const ProblemInputs in = MakeProblemInputs(p, Dtype(), FreshSeed());
  std::vector<float> lse(p.LseElements(), kLsePoison);
  std::vector<uint16_t> out(p.QElements(), kPoisonBits);
  const AttentionArgs args = AttentionArgs::Contiguous(p, in.dtype, in.q.data(), in.k.data(),
                                                       in.v.data(), out.data(), lse.data());
  ASSERT_TRUE(ValidateArgs(args, *FindKernel(Kernel())).ok());
  CpuThreadPool pool(2);
  std::atomic<bool> cancel{true};
  EXPECT_FALSE(RunCpuKernel(Kernel(), args, pool, &cancel));
  for (uint16_t bits : out) ASSERT_EQ(bits, kPoisonBits) << "a cancelled call wrote a row";
  cancel = false;
  EXPECT_TRUE(RunCpuKernel(Kernel(), args, pool, &cancel));
  EXPECT_EQ(CountNonFinite(out, in.dtype), 0);
}

INSTANTIATE_TEST_SUITE_P(KernelsAndDTypes, CpuReferenceTest,
                         ::testing::Combine(::testing::Values(std::string(kCpuFlashKernelName),
                                                              std::string(kFlashF32),
                                                              std::string(kCpuKernelName)),
                                            ::testing::Values(DType::kFloat16, DType::kBFloat16)),
                         [](const auto& info) {
                           return std::get<0>(info.param) + "_" +
                                  std::string(DTypeName(std::get<1>(info.param)));
                         });

}  // namespace
}  // namespace attn
