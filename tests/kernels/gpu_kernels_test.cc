// Every registered GPU kernel (the ladder, the step-7 tuning candidates and
// the production kernel "flash_fwd"), in fp16 and bf16, on every problem its
// capabilities accept, against the naive float32 GPU reference (itself checked
// against float64 on the CPU). The ladder gets dense self-attention at
// head_dim 128; flash_fwd every feature and combinations of them: lengths 1,
// 7, 100, 1000, 4097, decode (seqlen_q = 1), seqlen_q > and < seqlen_k with
// causal, GQA ratios 1, 2, 4, 8 and MQA, head dims 64..256, sliding windows,
// varlen batches of 0..3000 tokens, LSE, strided tensors, then random
// combinations. Fresh random inputs every run (the seed is printed); outputs
// and LSE poisoned with NaN before each launch, so every element must be
// written, finite and close; rows that see no key must be exactly 0 with LSE
// -inf. SanitizerSweep runs every kernel variant once on the smallest
// problems, for compute-sanitizer (bench/run_compute_sanitizer.sh).
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <memory>
#include <numeric>
#include <random>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include <gtest/gtest.h>

#include "absl/strings/str_cat.h"
#include "attn/attention.h"
#include "attn/cpu_reference.h"
#include "attn/gpu_reference.h"
#include "attn/kernel_family.h"
#include "attn/ladder.h"
#include "attn/validate.h"
#include "cuda_test_util.h"
#include "test_util.h"

namespace attn {
namespace {

using testing::DenseProblem;
using testing::DeviceBuffer;
using testing::FreshSeed;
using testing::SetVarlen;
using testing::TensorLayout;

constexpr uint16_t kPaddingBits = 0x7ffe;  // NaN in fp16 and bf16: input padding
constexpr int64_t kGpuPad = 8;             // padded strides stay 16-byte multiples

// One problem to run: what, and whether its tensors are strided.
struct GpuCase {
  std::string name;
  AttentionProblem problem;
  std::vector<int32_t> cu_q, cu_k;  // varlen
  bool strided = false;
};


AttentionProblem Window(AttentionProblem p, int64_t left, int64_t right) {
  p.window_left = left;
  p.window_right = right;
  return p;
}

AttentionProblem Scaled(AttentionProblem p, float scale) {
  p.softmax_scale = scale;
  return p;
}

GpuCase Make(std::string name, const AttentionProblem& p, bool strided = false) {
  return {std::move(name), p, {}, {}, strided};
}

GpuCase Varlen(std::string name, const AttentionProblem& p, const std::vector<int32_t>& q_lens,
               const std::vector<int32_t>& k_lens, bool strided = false) {
  GpuCase c{std::move(name), p, {}, {}, strided};
  SetVarlen(&c.problem, q_lens, k_lens, &c.cu_q, &c.cu_k);
  return c;
}

// Whether `kernel` takes the case (its capabilities, as ValidateArgs sees them).
bool Accepts(const KernelInfo& kernel, const GpuCase& c) {
  return ValidateProblem(c.problem, kernel).ok() && (!c.strided || kernel.caps.strided);
}

// A case on the device: inputs (dense or padded), the float32 reference
// output (dense, q's token order) and LSE on the host, and the buffers a
// kernel writes.
class DeviceCase {
 public:
  DeviceCase(const GpuCase& c, DType dtype)
      : c_(c),
        dtype_(dtype),
        seed_(FreshSeed()),
        q_layout_(TensorLayout::ForQ(c.problem, c.strided ? kGpuPad : 0)),
        kv_layout_(TensorLayout::ForKV(c.problem, c.strided ? kGpuPad : 0)) {}

  const AttentionProblem& problem() const { return c_.problem; }
  DType dtype() const { return dtype_; }
  const std::vector<float>& reference() const { return ref_out_; }
  const std::vector<float>& reference_lse() const { return ref_lse_; }

  std::string Describe() const {
    std::string s = absl::StrCat(c_.name, c_.strided ? " (strided) " : " ",
                                 c_.problem.ToString(), " ", DTypeName(dtype_),
                                 " scale=", c_.problem.softmax_scale, " seed=", seed_);
    if (c_.problem.varlen) {
      absl::StrAppend(&s, " q_lens=");
      for (size_t b = 0; b + 1 < c_.cu_q.size(); ++b) {
        absl::StrAppend(&s, b ? "," : "", c_.cu_q[b + 1] - c_.cu_q[b]);
      }
      absl::StrAppend(&s, " k_lens=");
      for (size_t b = 0; b + 1 < c_.cu_k.size(); ++b) {
        absl::StrAppend(&s, b ? "," : "", c_.cu_k[b + 1] - c_.cu_k[b]);
      }
    }
    return s;
  }

  // Allocates, fills the inputs and computes the reference.
  void Prepare() {
    const AttentionProblem& p = c_.problem;
    const int64_t q_elems = q_layout_.Elements(), kv_elems = kv_layout_.Elements();
    q_ = std::make_unique<DeviceBuffer>(q_elems * 2);
    k_ = std::make_unique<DeviceBuffer>(kv_elems * 2);
    v_ = std::make_unique<DeviceBuffer>(kv_elems * 2);
    out_ = std::make_unique<DeviceBuffer>(q_elems * 2);
    lse_ = std::make_unique<DeviceBuffer>(p.QTokens() * p.heads_q * sizeof(float));
    ASSERT_NE(q_->get(), nullptr);
    ASSERT_NE(k_->get(), nullptr);
    ASSERT_NE(v_->get(), nullptr);
    ASSERT_NE(out_->get(), nullptr);
    ASSERT_NE(lse_->get(), nullptr);
    if (p.varlen) {
      cu_q_ = std::make_unique<DeviceBuffer>(c_.cu_q);
      cu_k_ = std::make_unique<DeviceBuffer>(c_.cu_k);
      ASSERT_NE(cu_q_->get(), nullptr);
      ASSERT_NE(cu_k_->get(), nullptr);
    }
    if (c_.strided) {
      // Host draws, NaN between the elements: a kernel reading padding fails.
      const testing::ProblemInputs in = testing::MakeProblemInputs(p, dtype_, seed_, c_.cu_q,
                                                                   c_.cu_k);
      for (const auto& [buffer, layout, dense] :
           {std::make_tuple(q_.get(), &q_layout_, &in.q),
            std::make_tuple(k_.get(), &kv_layout_, &in.k),
            std::make_tuple(v_.get(), &kv_layout_, &in.v)}) {
        const std::vector<uint16_t> host = layout->Scatter(*dense, kPaddingBits);
        ATTN_ASSERT_CUDA(
            cudaMemcpy(buffer->get(), host.data(), host.size() * 2, cudaMemcpyHostToDevice));
      }
    } else {
      ASSERT_TRUE(FillRandomNormal(q_->get(), dtype_, q_elems, seed_, nullptr).ok());
      ASSERT_TRUE(FillRandomNormal(k_->get(), dtype_, kv_elems, seed_ + 1, nullptr).ok());
      ASSERT_TRUE(FillRandomNormal(v_->get(), dtype_, kv_elems, seed_ + 2, nullptr).ok());
    }
    DeviceBuffer ref(p.QElements() * sizeof(float));
    DeviceBuffer ref_lse(p.QTokens() * p.heads_q * sizeof(float));
    const absl::Status st = AttentionGpuReference(Args(), static_cast<float*>(ref.get()), nullptr,
                                                  static_cast<float*>(ref_lse.get()));
    ASSERT_TRUE(st.ok()) << st;
    ATTN_ASSERT_CUDA(cudaDeviceSynchronize());
    ref_out_ = ref.ToHost<float>();
    ref_lse_ = ref_lse.ToHost<float>();
    ASSERT_EQ(static_cast<int64_t>(ref_out_.size()), p.QElements());
  }

  AttentionArgs Args() const {
    const AttentionProblem& p = c_.problem;
    AttentionArgs args = AttentionArgs::Contiguous(
        p, dtype_, q_->get(), k_->get(), v_->get(), out_->get(),
        p.return_lse ? static_cast<float*>(lse_->get()) : nullptr);
    args.q_strides = args.out_strides = q_layout_.strides;
    args.k_strides = args.v_strides = kv_layout_.strides;
    if (p.varlen) {
      args.cu_seqlens_q = static_cast<const int32_t*>(cu_q_->get());
      args.cu_seqlens_k = static_cast<const int32_t*>(cu_k_->get());
    }
    return args;
  }

  // The inputs as dense floats, for the float64 reference.
  void HostInputs(std::vector<float>* q, std::vector<float>* k, std::vector<float>* v) const {
    auto convert = [&](const DeviceBuffer& buffer, const TensorLayout& layout,
                       std::vector<float>* values) {
      const std::vector<uint16_t> dense = layout.Gather(buffer.ToHost<uint16_t>());
      values->resize(dense.size());
      ToFloat(dense.data(), dtype_, dense.size(), values->data());
    };
    convert(*q_, q_layout_, q);
    convert(*k_, kv_layout_, k);
    convert(*v_, kv_layout_, v);
  }

  // Poisons O (padding included) and LSE, runs `kernel` (Run, or Launch:
  // no checks), checks everything. num_splits >= 0: with a workspace
  // (poisoned too) sized for that many splits or the kernel's own choice
  // (or `workspace_bytes` of it, if >= 0), and args.num_splits =
  // num_splits; -1: no workspace.
  void Check(const KernelHandle& kernel, bool launch = false, int num_splits = -1,
             int64_t workspace_bytes = -1) {
    const AttentionProblem& p = c_.problem;
    SCOPED_TRACE(kernel.info().name + " " + Describe() +
                 (num_splits >= 0 ? absl::StrCat(" num_splits=", num_splits) : "") +
                 (workspace_bytes >= 0 ? absl::StrCat(" workspace_bytes=", workspace_bytes) : ""));
    // 0xffff: NaN in fp16, bf16 and (0xffffffff) float32.
    ATTN_ASSERT_CUDA(cudaMemset(out_->get(), 0xff, out_->bytes()));
    ATTN_ASSERT_CUDA(cudaMemset(lse_->get(), 0xff, lse_->bytes()));
    AttentionArgs args = Args();
    std::unique_ptr<DeviceBuffer> workspace;
    if (num_splits >= 0) {
      const int64_t bytes =
          workspace_bytes >= 0
              ? std::max<int64_t>(workspace_bytes, 16)
              : std::max<int64_t>(
                    {SplitKvWorkspaceBytes(p, num_splits), kernel.WorkspaceBytes(p), 16});
      workspace = std::make_unique<DeviceBuffer>(bytes);
      ASSERT_NE(workspace->get(), nullptr);
      ATTN_ASSERT_CUDA(cudaMemset(workspace->get(), 0xff, bytes));
      args.workspace = workspace->get();
      args.workspace_bytes = bytes;
      args.num_splits = num_splits;
    }
    const absl::Status st = launch ? kernel.Launch(args, nullptr) : kernel.Run(args, nullptr);
    ASSERT_TRUE(st.ok()) << st;
    ATTN_ASSERT_CUDA(cudaDeviceSynchronize());
    const std::vector<uint16_t> laid_out = out_->ToHost<uint16_t>();
    ASSERT_EQ(static_cast<int64_t>(laid_out.size()), q_layout_.Elements());
    if (c_.strided) {
      EXPECT_EQ(q_layout_.CountPaddingNot(laid_out, 0xffff), 0) << "writes between elements";
    }
    const std::vector<uint16_t> out = q_layout_.Gather(laid_out);
    EXPECT_EQ(testing::CountNonFinite(out, dtype_), 0) << "unwritten or non-finite outputs";
    std::vector<double> ref(ref_out_.begin(), ref_out_.end());
    const double err = testing::RelativeL2Error(out, dtype_, ref);
    // Output rounding alone is ~2^-9 (bf16) or ~2^-12 (fp16) relative, and
    // P is rounded to 16 bits before the second GEMM.
    EXPECT_LT(err, dtype_ == DType::kBFloat16 ? 1e-2 : 5e-3);
    double lse_err = 0.0;
    if (p.return_lse) {
      const std::vector<float> lse = lse_->ToHost<float>();
      std::vector<double> ref_lse(ref_lse_.begin(), ref_lse_.end());
      lse_err = testing::MaxLseError(lse, ref_lse);
      EXPECT_LT(lse_err, 1e-3) << "LSE (a row that sees no key must be exactly -inf)";
    }
    // Rows that see no key: exactly 0.
    int64_t nonzero_empty = 0, empty_rows = 0;
    for (int64_t row = 0; row < p.QTokens(); ++row) {
      for (int64_t h = 0; h < p.heads_q; ++h) {
        if (!std::isinf(ref_lse_[LseIndex(row, h)])) continue;
        ++empty_rows;
        for (int64_t d = 0; d < p.head_dim; ++d) {
          nonzero_empty += BitsToFloat(out[(row * p.heads_q + h) * p.head_dim + d], dtype_) != 0.0f;
        }
      }
    }
    EXPECT_EQ(nonzero_empty, 0) << "of the rows that see no key (" << empty_rows << ")";
    std::printf("  %-28s %s rel_err %.2e lse_err %.1e\n", kernel.info().name.c_str(),
                Describe().c_str(), err, lse_err);
  }

 private:
  // Index in the LSE layout of packed query token `row` (batch-major
  // without varlen), head h.
  int64_t LseIndex(int64_t row, int64_t h) const {
    const AttentionProblem& p = c_.problem;
    if (p.varlen) return h * p.total_q + row;
    const int64_t b = row / p.seqlen_q, i = row % p.seqlen_q;
    return (b * p.heads_q + h) * p.seqlen_q + i;
  }

  GpuCase c_;
  DType dtype_;
  uint64_t seed_;
  TensorLayout q_layout_, kv_layout_;
  std::unique_ptr<DeviceBuffer> q_, k_, v_, out_, lse_, cu_q_, cu_k_;
  std::vector<float> ref_out_, ref_lse_;
};

std::vector<KernelHandle> AllGpuKernels() {
  ladder::Register();
  std::vector<KernelHandle> kernels;
  std::vector<KernelInfo> infos;
  for (KernelInfo& k : ListKernels()) {
    if (k.backend == Backend::kCuda) infos.push_back(std::move(k));
  }
  for (KernelInfo& k : ListTuningCandidates()) infos.push_back(std::move(k));
  // flash_fwd pinned to each family the device runs ("flash_fwd@ampere"
  // on a Hopper device, where flash_fwd itself runs the hopper family).
  if (const std::vector<DeviceInfo> devices = ListCudaDevices(); !devices.empty()) {
    for (const KernelFamily& family : KernelFamilies()) {
      if (!family.built() || !family.RunsOn(devices.front().ComputeCapability())) continue;
      KernelInfo pinned;
      pinned.name = absl::StrCat(kProductionKernelName, "@", family.name);
      infos.push_back(std::move(pinned));
    }
  }
  for (const KernelInfo& info : infos) {
    absl::StatusOr<KernelHandle> handle = ResolveKernel(info.name);
    EXPECT_TRUE(handle.ok()) << info.name << ": " << handle.status();
    if (handle.ok()) kernels.push_back(*handle);
  }
  return kernels;
}

// Runs every kernel that accepts it on every case; returns how many runs
// each kernel got (by position in `kernels`).
std::vector<int> RunCases(const std::vector<KernelHandle>& kernels,
                          const std::vector<GpuCase>& cases, DType dtype) {
  std::vector<int> runs(kernels.size(), 0);
  for (const GpuCase& c : cases) {
    bool any = false;
    for (const KernelHandle& k : kernels) any = any || Accepts(k.info(), c);
    if (!any) {
      ADD_FAILURE() << "no kernel accepts case " << c.name << " " << c.problem.ToString();
      continue;
    }
    DeviceCase device(c, dtype);
    device.Prepare();
    if (::testing::Test::HasFatalFailure()) return runs;
    for (size_t i = 0; i < kernels.size(); ++i) {
      if (!Accepts(kernels[i].info(), c)) continue;
      device.Check(kernels[i]);
      ++runs[i];
      if (::testing::Test::HasFatalFailure()) return runs;
    }
  }
  return runs;
}

// Dense self-attention at head_dim 128, every length a multiple of every
// ladder block: what the ladder takes (flash_fwd too).
std::vector<GpuCase> LadderCases() {
  return {
      Make("ladder", DenseProblem(1, 128, 128, 1, 1, 128, false, false)),
      Make("ladder", DenseProblem(2, 256, 256, 16, 16, 128, false, false)),
      Make("ladder scale 0.3", Scaled(DenseProblem(3, 512, 512, 2, 2, 128, false, false), 0.3f)),
      Make("ladder", DenseProblem(1, 1024, 1024, 16, 16, 128, false, false)),
      Make("ladder", DenseProblem(2, 2048, 2048, 4, 4, 128, false, false)),
      Make("ladder", DenseProblem(1, 4096, 4096, 16, 16, 128, false, false)),
  };
}

// Every feature of flash_fwd, one or two at a time, then together.
std::vector<GpuCase> FeatureCases() {
  std::vector<GpuCase> cases;
  // Lengths, self-attention, causal or not.
  for (int64_t s : {1, 7, 100, 1000, 4097}) {
    cases.push_back(Make(absl::StrCat("S=", s), DenseProblem(2, s, s, 8, 8, 128)));
    cases.push_back(Make(absl::StrCat("S=", s, " causal"), DenseProblem(2, s, s, 8, 8, 128, true)));
  }
  // Decode: one query row.
  for (int64_t sk : {1, 100, 4097}) {
    cases.push_back(Make(absl::StrCat("decode Sk=", sk), DenseProblem(4, 1, sk, 32, 4, 128)));
    cases.push_back(Make(absl::StrCat("decode Sk=", sk, " causal MQA"),
                         DenseProblem(4, 1, sk, 16, 1, 128, true)));
  }
  // seqlen_q > seqlen_k (causal: the first rows see nothing) and <.
  const int64_t pairs[][2] = {{100, 7}, {1000, 100}, {4097, 1000}, {7, 1},
                              {7, 100}, {100, 1000}, {1000, 4097}, {7, 4097}};
  for (const auto& [sq, sk] : pairs) {
    cases.push_back(
        Make(absl::StrCat("Sq=", sq, " Sk=", sk, " causal"), DenseProblem(2, sq, sk, 8, 8, 128, true)));
    cases.push_back(Make(absl::StrCat("Sq=", sq, " Sk=", sk), DenseProblem(1, sq, sk, 8, 4, 128)));
  }
  // GQA ratios 1, 2, 4, 8 and MQA.
  for (int64_t heads_kv : {16, 8, 4, 2, 1}) {
    cases.push_back(Make(absl::StrCat("GQA ", 16 / heads_kv),
                         DenseProblem(1, 1000, 1000, 16, heads_kv, 128, heads_kv % 2 == 0)));
  }
  // Head dims, with other features.
  for (int64_t d : {64, 96, 128, 192, 256}) {
    cases.push_back(Make(absl::StrCat("D=", d), DenseProblem(2, 1000, 1000, 4, 4, d)));
    cases.push_back(
        Make(absl::StrCat("D=", d, " causal GQA Sq<Sk"), DenseProblem(2, 100, 1000, 8, 2, d, true)));
    cases.push_back(Make(absl::StrCat("D=", d, " window Sq>Sk"),
                         Window(DenseProblem(1, 1000, 300, 4, 1, d), 64, 16)));
  }
  // Sliding windows.
  cases.push_back(Make("window left", Window(DenseProblem(2, 1000, 1000, 8, 8, 128), 256, -1)));
  cases.push_back(Make("window right", Window(DenseProblem(2, 1000, 1000, 8, 8, 128), -1, 256)));
  cases.push_back(Make("window 0,0", Window(DenseProblem(2, 1000, 1000, 8, 8, 128), 0, 0)));
  cases.push_back(Make("window 128,64", Window(DenseProblem(1, 4097, 4097, 8, 2, 128), 128, 64)));
  cases.push_back(Make("window causal", Window(DenseProblem(1, 4097, 4097, 8, 8, 128, true), 512, -1)));
  cases.push_back(Make("window Sq<Sk", Window(DenseProblem(2, 100, 1000, 8, 8, 64), 30, 30)));
  cases.push_back(Make("window Sq>Sk empty rows", Window(DenseProblem(2, 1000, 100, 8, 8, 64), 5, 0)));
  cases.push_back(Make("window 0,0 Sq>Sk", Window(DenseProblem(1, 300, 100, 4, 4, 96), 0, 0)));
  // Varlen, lengths 0..3000.
  cases.push_back(Varlen("varlen", DenseProblem(0, 0, 0, 8, 8, 128), {1, 7, 100, 1000, 3000, 64},
                         {1, 7, 100, 1000, 3000, 64}));
  cases.push_back(Varlen("varlen Sq!=Sk causal GQA", DenseProblem(0, 0, 0, 16, 4, 128, true),
                         {1, 7, 100, 1000, 3000, 0, 5}, {3000, 1, 130, 999, 2000, 17, 0}));
  cases.push_back(Varlen("varlen window MQA", Window(DenseProblem(0, 0, 0, 8, 1, 64), 100, 10),
                         {500, 1, 2999}, {700, 50, 3000}));
  for (int64_t d : {64, 96, 192, 256}) {
    cases.push_back(Varlen(absl::StrCat("varlen D=", d), DenseProblem(0, 0, 0, 4, 2, d, true),
                           {77, 1, 1500, 300}, {77, 64, 1400, 301}));
  }
  // Strided tensors.
  cases.push_back(Make("strided", DenseProblem(2, 1000, 1000, 8, 8, 128), true));
  cases.push_back(Make("strided causal GQA Sq<Sk D=64", DenseProblem(2, 100, 700, 8, 2, 64, true), true));
  cases.push_back(Varlen("strided varlen window", Window(DenseProblem(0, 0, 0, 8, 4, 256), 50, 50),
                         {300, 1, 1000}, {200, 40, 1000}, true));
  // A scale of our own; no LSE asked for.
  cases.push_back(Make("scale 0.3", Scaled(DenseProblem(2, 1000, 1000, 8, 8, 128, true), 0.3f)));
  cases.push_back(Make("no LSE", DenseProblem(2, 1000, 500, 8, 4, 192, true, false)));
  return cases;
}

// Random combinations of every feature. Work per case is bounded so the
// naive reference stays fast.
std::vector<GpuCase> RandomCases(uint64_t seed, int count) {
  std::mt19937_64 rng(seed);
  auto pick = [&](std::initializer_list<int64_t> values) {
    return *(values.begin() + std::uniform_int_distribution<size_t>(0, values.size() - 1)(rng));
  };
  auto chance = [&](double p) { return std::uniform_real_distribution<double>(0, 1)(rng) < p; };
  auto length = [&]() {
    return chance(0.3) ? std::uniform_int_distribution<int64_t>(1, 3000)(rng)
                       : pick({1, 7, 64, 100, 128, 1000, 4097});
  };
  std::vector<GpuCase> cases;
  for (int n = 0; n < count; ++n) {
    if (chance(0.2)) {  // a ladder shape now and then, for the ladder's random draws
      const int64_t s = 128 * std::uniform_int_distribution<int64_t>(1, 16)(rng);
      cases.push_back(Make("random ladder", DenseProblem(pick({1, 2, 3}), s, s, pick({1, 4, 12}),
                                                  0, 128, false, false)));
      cases.back().problem.heads_kv = cases.back().problem.heads_q;
      continue;
    }
    AttentionProblem p;
    p.head_dim = pick({64, 96, 128, 192, 256});
    p.heads_kv = pick({1, 2, 4, 8});
    p.heads_q = p.heads_kv * pick({1, 2, 4, 8});
    p.causal = chance(0.5);
    if (chance(0.3)) {
      p.window_left = pick({-1, 0, 1, 16, 100, 1000});
      p.window_right = pick({-1, 0, 3, 64});
    }
    p.return_lse = chance(0.8);
    if (chance(0.3)) p.softmax_scale = std::uniform_real_distribution<float>(0.02f, 0.5f)(rng);
    GpuCase c;
    if (chance(0.3)) {
      const int64_t batch = std::uniform_int_distribution<int64_t>(1, 8)(rng);
      std::vector<int32_t> q_lens, k_lens;
      for (int64_t b = 0; b < batch; ++b) {
        q_lens.push_back(static_cast<int32_t>(chance(0.1) ? 0 : length() % 3001));
        k_lens.push_back(static_cast<int32_t>(chance(0.1) ? 0 : length() % 3001));
      }
      // Totals of at least 1 (empty sequences are fine, empty batches are not).
      if (std::accumulate(q_lens.begin(), q_lens.end(), 0) == 0) q_lens[0] = 1;
      if (std::accumulate(k_lens.begin(), k_lens.end(), 0) == 0) k_lens[0] = 1;
      c = Varlen("random varlen", p, q_lens, k_lens, chance(0.2));
    } else {
      p.batch = pick({1, 2, 3});
      p.seqlen_q = length();
      p.seqlen_k = chance(0.3) ? p.seqlen_q : length();
      c = Make("random", p, chance(0.2));
    }
    // Bound the reference's work: query rows x keys x heads x head_dim.
    const double work = [&] {
      AttentionProblem w = c.problem;
      w.causal = false;
      w.window_left = w.window_right = -1;
      return w.VisiblePairs(c.cu_q.empty() ? nullptr : c.cu_q.data(),
                            c.cu_k.empty() ? nullptr : c.cu_k.data()) *
             w.heads_q * w.head_dim;
    }();
    if (work > 4e10) {
      const int64_t g = c.problem.heads_q / c.problem.heads_kv;
      c.problem.heads_kv = 1;
      c.problem.heads_q = g;
    }
    cases.push_back(std::move(c));
  }
  return cases;
}

class GpuKernelsTest : public ::testing::TestWithParam<DType> {
 protected:
  void SetUp() override { ATTN_SKIP_WITHOUT_GPU(); }
};

// The float32 GPU reference itself, against float64 on the CPU, on every
// feature.
TEST_P(GpuKernelsTest, GpuReferenceMatchesFloat64) {
  const std::vector<GpuCase> cases = {
      Make("self", DenseProblem(2, 192, 192, 3, 3, 128, false)),
      Make("causal Sq>Sk GQA", DenseProblem(2, 130, 40, 8, 2, 64, true)),
      Make("causal Sq<Sk MQA D=256", DenseProblem(1, 40, 300, 4, 1, 256, true)),
      Make("decode", DenseProblem(3, 1, 257, 4, 4, 96, true)),
      Make("window", Window(DenseProblem(1, 200, 150, 2, 2, 192), 20, 5)),
      Make("strided", DenseProblem(2, 70, 90, 4, 2, 128, true), true),
      Varlen("varlen", Window(DenseProblem(0, 0, 0, 4, 2, 64, true), 30, -1), {1, 0, 100, 37},
             {5, 3, 130, 0}),
  };
  for (const GpuCase& c : cases) {
    DeviceCase p(c, GetParam());
    ASSERT_NO_FATAL_FAILURE(p.Prepare());
    SCOPED_TRACE(p.Describe());
    std::vector<float> q, k, v;
    p.HostInputs(&q, &k, &v);
    std::vector<double> exact_lse;
    const std::vector<double> exact =
        AttentionNaiveF64(c.problem, q.data(), k.data(), v.data(), c.cu_q.data(), c.cu_k.data(),
                          &exact_lse);
    EXPECT_LT(testing::RelativeL2Error(p.reference(), exact), 1e-5);
    EXPECT_LT(testing::MaxLseError(p.reference_lse(), exact_lse), 1e-4);
  }
}

// The ladder (and flash_fwd) on dense self-attention at head_dim 128.
TEST_P(GpuKernelsTest, EveryKernelMatchesReferenceOnLadderShapes) {
  const std::vector<KernelHandle> kernels = AllGpuKernels();
  ASSERT_FALSE(kernels.empty());
  const std::vector<int> runs = RunCases(kernels, LadderCases(), GetParam());
  for (size_t i = 0; i < kernels.size(); ++i) {
    EXPECT_GT(runs[i], 0) << kernels[i].info().name << " ran on no ladder shape";
  }
}

// flash_fwd (and any other kernel with the capabilities) on every feature.
TEST_P(GpuKernelsTest, EveryFeatureMatchesReference) {
  const std::vector<KernelHandle> kernels = AllGpuKernels();
  ASSERT_TRUE(FindKernel(kProductionKernelName).ok()) << "no " << kProductionKernelName;
  RunCases(kernels, FeatureCases(), GetParam());
}

// Random combinations of the features, for every kernel that takes them.
TEST_P(GpuKernelsTest, RandomCombinationsMatchReference) {
  const uint64_t seed = FreshSeed();
  std::printf("  random cases from seed %llu\n", static_cast<unsigned long long>(seed));
  SCOPED_TRACE(absl::StrCat("random cases from seed ", seed));
  RunCases(AllGpuKernels(), RandomCases(seed, 24), GetParam());
}

// Large scores (softmax nearly one-hot) must not overflow the online softmax.
// flash_fwd's decode tile (few query rows: GQA-packed, split-KV) with
// every split count forced and with its own choice, against the reference,
// the workspace NaN-poisoned: Sq 1…16, Sk from 1 past block edges to long,
// GQA ratios 1…8 and MQA, every head_dim, causal, windows, LSE, varlen
// with empty sequences.
TEST_P(GpuKernelsTest, DecodeSplitsMatchReference) {
  const absl::StatusOr<KernelHandle> kernel = ResolveKernel(kProductionKernelName);
  ASSERT_TRUE(kernel.ok()) << kernel.status();
  std::vector<GpuCase> cases;
  for (int64_t sk : {1, 31, 32, 33, 1000, 8192}) {
    cases.push_back(Make(absl::StrCat("decode Sk=", sk), DenseProblem(3, 1, sk, 32, 8, 128, true)));
  }
  for (int64_t sq : {2, 4, 5, 16}) {
    cases.push_back(
        Make(absl::StrCat("speculative Sq=", sq), DenseProblem(2, sq, 777, 16, 4, 128, true)));
  }
  for (int64_t heads_kv : {16, 8, 4, 2, 1}) {
    cases.push_back(Make(absl::StrCat("GQA 16/", heads_kv), DenseProblem(2, 3, 500, 16, heads_kv, 128)));
  }
  for (int64_t d : {64, 96, 192, 256}) {
    cases.push_back(Make(absl::StrCat("D=", d), DenseProblem(2, 1, 700, 8, 2, d, true)));
  }
  cases.push_back(Make("window", Window(DenseProblem(2, 4, 2000, 8, 2, 128), 300, 0)));
  cases.push_back(Make("window Sq>Sk empty rows", Window(DenseProblem(1, 16, 10, 8, 8, 64), 2, 0)));
  cases.push_back(Make("no LSE", DenseProblem(2, 1, 3000, 8, 1, 128, false, false)));
  cases.push_back(Make("strided", DenseProblem(2, 2, 900, 8, 2, 128, true), true));
  cases.push_back(Varlen("varlen", DenseProblem(0, 0, 0, 32, 8, 128, true), {1, 0, 4, 1, 16},
                         {5000, 0, 37, 1, 100}));
  int runs = 0;
  for (const GpuCase& c : cases) {
    DeviceCase device(c, GetParam());
    ASSERT_NO_FATAL_FAILURE(device.Prepare());
    // 9 and 50: combines of 2 and 7 warps, whose last warps sum fewer splits.
    for (int splits : {0, 1, 2, 3, 7, 9, 50, kMaxSplits}) {
      ASSERT_NO_FATAL_FAILURE(device.Check(*kernel, /*launch=*/false, splits));
      ++runs;
    }
  }
  EXPECT_EQ(runs, static_cast<int>(cases.size()) * 8);
}

// A split count without the workspace it needs, or out of range, is
// refused naming the field, before anything runs.
TEST_P(GpuKernelsTest, DecodeSplitsRefuseASmallWorkspace) {
  const absl::StatusOr<KernelHandle> kernel = ResolveKernel(kProductionKernelName);
  ASSERT_TRUE(kernel.ok()) << kernel.status();
  DeviceCase device(Make("decode", DenseProblem(2, 1, 4096, 32, 8, 128, true)), GetParam());
  ASSERT_NO_FATAL_FAILURE(device.Prepare());
  AttentionArgs args = device.Args();
  args.num_splits = 4;
  absl::Status st = kernel->Run(args, nullptr);
  EXPECT_EQ(st.code(), absl::StatusCode::kInvalidArgument) << st;
  EXPECT_NE(st.message().find("workspace_bytes"), std::string::npos) << st;
  DeviceBuffer small(SplitKvWorkspaceBytes(device.problem(), 4) - 16);
  args.workspace = small.get();
  args.workspace_bytes = small.bytes();
  st = kernel->Run(args, nullptr);
  EXPECT_EQ(st.code(), absl::StatusCode::kInvalidArgument) << st;
  EXPECT_NE(st.message().find("num_splits = 4 needs"), std::string::npos) << st;
  args.num_splits = kMaxSplits + 1;
  st = kernel->Run(args, nullptr);
  EXPECT_EQ(st.code(), absl::StatusCode::kInvalidArgument) << st;
  EXPECT_NE(st.message().find("num_splits is"), std::string::npos) << st;
}

// What an owner of one workspace per stream (the server's executors)
// relies on: MaxWorkspaceBytes covers the kernel's own choice for every
// problem on the device, and a workspace too small for that choice makes it
// split less, not fail: the result stays right.
TEST_P(GpuKernelsTest, DecodeWorkspaceBoundCoversEveryProblem) {
  ATTN_SKIP_WITHOUT_GPU();
  const std::vector<DeviceInfo> devices = ListCudaDevices();
  ATTN_ASSERT_CUDA(cudaSetDevice(devices.front().ordinal));
  const absl::StatusOr<KernelHandle> kernel =
      ResolveKernel(kProductionKernelName, devices.front());
  ASSERT_TRUE(kernel.ok()) << kernel.status();
  const int64_t most = kernel->MaxWorkspaceBytes();
  EXPECT_GT(most, 0);
  int splitting = 0;
  const std::pair<int64_t, int64_t> head_counts[] = {{32, 8}, {8, 8}, {64, 1}, {16, 2}};
  for (int64_t batch : {1, 2, 3, 8, 17, 64, 200}) {
    for (int64_t sq : {1, 2, 4, 16}) {
      for (int64_t sk : {1, 33, 4096, 131072}) {
        for (const auto& [heads_q, heads_kv] : head_counts) {
          for (int64_t d : {64, 96, 128, 192, 256}) {
            const AttentionProblem p = DenseProblem(batch, sq, sk, heads_q, heads_kv, d, sq > 1);
            const int64_t bytes = kernel->WorkspaceBytes(p);
            EXPECT_LE(bytes, most) << p.ToString();
            splitting += bytes > 0;
          }
        }
      }
    }
  }
  EXPECT_GT(splitting, 0) << "no problem of the grid splits";
  const GpuCase c = Make("decode, short workspace", DenseProblem(1, 1, 20000, 32, 8, 128, true));
  ASSERT_GT(kernel->WorkspaceBytes(c.problem), SplitKvWorkspaceBytes(c.problem, 3));
  DeviceCase device(c, GetParam());
  ASSERT_NO_FATAL_FAILURE(device.Prepare());
  for (int splits : {2, 3}) {
    ASSERT_NO_FATAL_FAILURE(device.Check(*kernel, /*launch=*/true, /*num_splits=*/0,
                                         SplitKvWorkspaceBytes(c.problem, splits) + 8));
  }
  ASSERT_NO_FATAL_FAILURE(device.Check(*kernel, /*launch=*/true, /*num_splits=*/0,
                                       SplitKvWorkspaceBytes(c.problem, 2) - 16));
}

TEST_P(GpuKernelsTest, StableUnderLargeScores) {
  RunCases(AllGpuKernels(),
           {Make("large scores", Scaled(DenseProblem(1, 512, 512, 2, 2, 128, false, false), 2.0f)),
            Make("large scores causal GQA", Scaled(DenseProblem(1, 700, 900, 8, 2, 128, true), 2.0f))},
           GetParam());
}

// Arguments a kernel cannot take are refused before anything runs.
TEST_P(GpuKernelsTest, RefusesBadArguments) {
  const DType dtype = GetParam();
  const AttentionProblem p = DenseProblem(1, 128, 128, 2, 2, 128, false, false);
  DeviceBuffer q(p.QBytes(dtype)), k(p.KVBytes(dtype)), v(p.KVBytes(dtype)),
      out(p.QBytes(dtype));
  std::vector<uint16_t> host(p.QElements());
  ATTN_ASSERT_CUDA(cudaMemset(out.get(), 0xff, out.bytes()));
  auto expect_refused = [&](const AttentionArgs& args, const KernelInfo& kernel,
                            const std::string& needle) {
    const absl::Status st = Forward(args, kernel.name, nullptr);
    EXPECT_EQ(st.code(), absl::StatusCode::kInvalidArgument) << kernel.name << ": " << st;
    EXPECT_NE(st.message().find(needle), std::string::npos)
        << kernel.name << ": '" << st.message() << "' should mention '" << needle << "'";
  };
  for (const KernelHandle& handle : AllGpuKernels()) {
    const KernelInfo& kernel = handle.info();
    // Host memory where device memory belongs.
    expect_refused(
        AttentionArgs::Contiguous(p, dtype, host.data(), k.get(), v.get(), out.get()), kernel,
        "q");
    // Misaligned device memory.
    expect_refused(AttentionArgs::Contiguous(p, dtype, q.get(), k.get(),
                                             static_cast<char*>(v.get()) + 2, out.get()),
                   kernel, "16-byte aligned");
    // LSE asked for without a buffer (or by a kernel without LSE).
    AttentionProblem with_lse = p;
    with_lse.return_lse = true;
    expect_refused(AttentionArgs::Contiguous(with_lse, dtype, q.get(), k.get(), v.get(),
                                             out.get(), nullptr),
                   kernel, kernel.caps.lse ? "lse is null" : "return_lse");
    if (!kernel.caps.window) {
      expect_refused(AttentionArgs::Contiguous(Window(p, 16, -1), dtype, q.get(), k.get(),
                                               v.get(), out.get()),
                     kernel, "window_left is 16");
    }
    if (!kernel.caps.head_dims.empty()) {
      AttentionProblem d80 = p;
      d80.head_dim = 80;
      expect_refused(
          AttentionArgs::Contiguous(d80, dtype, q.get(), k.get(), v.get(), out.get()), kernel,
          "head_dim is 80");
    }
  }
  ATTN_ASSERT_CUDA(cudaDeviceSynchronize());
  // Nothing ran: the output is still poison.
  for (uint16_t bits : out.ToHost<uint16_t>()) ASSERT_EQ(bits, 0xffff);
}

// Handles resolved per device: bound to it, in the family it runs, their
// launch attributes set at resolution; Launch (no checks) computes what Run
// does, and Run refuses a thread whose current device is another one.
TEST_P(GpuKernelsTest, PerDeviceHandlesLaunchWithoutChecks) {
  ATTN_SKIP_WITHOUT_GPU();
  ladder::Register();
  const std::vector<DeviceInfo> devices = ListCudaDevices();
  for (const DeviceInfo& device : devices) {
    SCOPED_TRACE(device.name + " #" + std::to_string(device.ordinal));
    ATTN_ASSERT_CUDA(cudaSetDevice(device.ordinal));
    for (const char* name : {kProductionKernelName, "k07_autotuned", "k16_static_strides"}) {
      const absl::StatusOr<KernelHandle> kernel = ResolveKernel(name, device);
      ASSERT_TRUE(kernel.ok()) << name << ": " << kernel.status();
      EXPECT_EQ(kernel->device(), device.ordinal);
      // flash_fwd runs the best family of the device; the ladder is Ampere's.
      std::vector<const KernelFamily*> families;
      for (const KernelFamily& family : KernelFamilies()) families.push_back(&family);
      const KernelFamily* best = BestFamily(families, device.ComputeCapability());
      ASSERT_NE(best, nullptr);
      EXPECT_EQ(kernel->info().family,
                std::string(name) == kProductionKernelName ? best->name : "ampere");
      const GpuCase c =
          kernel->info().caps.causal
              ? Make("per device causal GQA", DenseProblem(2, 100, 300, 8, 2, 128, true))
              : Make("per device ladder", DenseProblem(1, 256, 256, 16, 16, 128, false, false));
      EXPECT_EQ(kernel->WorkspaceBytes(c.problem), 0);
      DeviceCase run(c, GetParam());
      ASSERT_NO_FATAL_FAILURE(run.Prepare());
      ASSERT_NO_FATAL_FAILURE(run.Check(*kernel, /*launch=*/false));
      ASSERT_NO_FATAL_FAILURE(run.Check(*kernel, /*launch=*/true));
      if (devices.size() > 1) {
        const int other = devices[device.ordinal == devices[0].ordinal ? 1 : 0].ordinal;
        ATTN_ASSERT_CUDA(cudaSetDevice(other));
        const absl::Status st = kernel->Run(run.Args(), nullptr);
        EXPECT_EQ(st.code(), absl::StatusCode::kFailedPrecondition) << st;
        ATTN_ASSERT_CUDA(cudaSetDevice(device.ordinal));
      }
    }
  }
  ATTN_ASSERT_CUDA(cudaSetDevice(devices.front().ordinal));
}

// compute-sanitizer's sweep (bench/run_compute_sanitizer.sh runs memcheck,
// racecheck, synccheck and initcheck over this test alone): every
// registered GPU kernel, fp16 and bf16, on the smallest problems that reach
// each of its compiled variants, so each tool covers every kernel in bounded
// time (racecheck slows kernels by orders of magnitude, in proportion to
// their shared-memory accesses). Outputs are checked as in the tests above.
//
// A ladder kernel (even lengths, no mask: one variant per dtype) gets one
// tile's rows, [1, seq_multiple, 16, 128]: 16 heads of 128 give the row
// stride step 16 compiles in, so k16 runs its static-stride kernel (other
// strides run step 15's). flash_fwd gets, per head_dim, one problem per
// launch variant (lengths even or not x masked or not), with LSE, GQA/MQA,
// Sq != Sk, a two-sided window, varlen and strides spread over them.
std::vector<GpuCase> SweepCases(const KernelInfo& kernel) {
  std::vector<GpuCase> cases;
  if (!kernel.caps.causal) {
    const int64_t rows = std::max(1, kernel.caps.seq_multiple);
    for (int d : kernel.caps.head_dims) {
      cases.push_back(Make(absl::StrCat("sweep ladder D=", d),
                           DenseProblem(1, rows, rows, 16, 16, d, false, false)));
    }
    return cases;
  }
  for (int d : kernel.caps.head_dims) {
    const std::string dim = absl::StrCat(" D=", d);
    // 128 rows are a multiple of every tile's block_m and block_n (powers of
    // two up to 128): even. 7 rows, or varlen, are never even.
    cases.push_back(Make("sweep even, LSE" + dim, DenseProblem(1, 128, 128, 2, 2, d)));
    cases.push_back(Make("sweep even masked: causal MQA, no LSE" + dim,
                         DenseProblem(1, 128, 128, 2, 1, d, true, false)));
    cases.push_back(Make("sweep uneven: Sq<Sk GQA strided, LSE" + dim,
                         DenseProblem(2, 7, 100, 4, 2, d), /*strided=*/true));
    cases.push_back(Varlen("sweep uneven masked: varlen window GQA, LSE" + dim,
                           Window(DenseProblem(0, 0, 0, 4, 2, d), 16, 4), {1, 70, 0},
                           {5, 130, 3}));
  }
  return cases;
}

TEST(SanitizerSweep, EveryKernelVariantOnce) {
  ATTN_SKIP_WITHOUT_GPU();
  const std::vector<KernelHandle> kernels = AllGpuKernels();
  ASSERT_FALSE(kernels.empty());
  int covered = 0, runs = 0;
  for (const KernelHandle& kernel : kernels) {
    const std::vector<GpuCase> cases = SweepCases(kernel.info());
    ASSERT_FALSE(cases.empty()) << kernel.info().name << " has no sweep problem";
    for (DType dtype : {DType::kFloat16, DType::kBFloat16}) {
      for (const GpuCase& c : cases) {
        ASSERT_TRUE(Accepts(kernel.info(), c))
            << kernel.info().name << " refuses its sweep problem " << c.name << " "
            << c.problem.ToString();
        DeviceCase device(c, dtype);
        ASSERT_NO_FATAL_FAILURE(device.Prepare());
        ASSERT_NO_FATAL_FAILURE(device.Check(kernel));
        ++runs;
        // Its line is out even if a sanitizer's time limit kills the run.
        std::fflush(stdout);
      }
    }
    ++covered;
  }
  // bench/run_compute_sanitizer.sh reads this line.
  std::printf("sanitizer sweep: %d of %zu registered GPU kernels covered, %d runs\n", covered,
              kernels.size(), runs);
}

INSTANTIATE_TEST_SUITE_P(AllDTypes, GpuKernelsTest,
                         ::testing::Values(DType::kFloat16, DType::kBFloat16),
                         [](const auto& param_info) {
                           return std::string(DTypeName(param_info.param));
                         });

}  // namespace
}  // namespace attn
