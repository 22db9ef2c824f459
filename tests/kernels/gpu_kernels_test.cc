// Every registered GPU kernel (the ladder and the step-7 tuning candidates),
// in fp16 and bf16, against references in higher precision: the naive float32
// GPU reference at every shape, itself checked against float64 on the CPU.
// Fresh random inputs every run; outputs poisoned with NaN before each launch.
#include <cmath>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "attn/attention.h"
#include "attn/cpu_reference.h"
#include "attn/gpu_reference.h"
#include "cuda_test_util.h"
#include "test_util.h"

namespace attn {
namespace {

using testing::DeviceBuffer;
using testing::FreshSeed;
using testing::kPoisonBits;

// Inputs on the device, plus the float32 reference output on the host.
struct DeviceProblem {
  Shape shape;
  DType dtype;
  uint64_t seed;
  float scale;
  DeviceBuffer q, k, v, out;
  std::vector<double> reference;

  DeviceProblem(const Shape& s, DType d, float softmax_scale)
      : shape(s),
        dtype(d),
        seed(FreshSeed()),
        scale(softmax_scale),
        q(s.NumElements() * 2),
        k(s.NumElements() * 2),
        v(s.NumElements() * 2),
        out(s.NumElements() * 2) {}

  AttentionArgs Args() const {
    AttentionArgs args;
    args.q = {q.get(), dtype, shape};
    args.k = {k.get(), dtype, shape};
    args.v = {v.get(), dtype, shape};
    args.out = {out.get(), dtype, shape};
    args.softmax_scale = scale;
    return args;
  }

  std::string Describe() const {
    return shape.ToString() + " " + DTypeName(dtype) + " scale=" + std::to_string(scale) +
           " seed=" + std::to_string(seed);
  }
};

void Prepare(DeviceProblem& p) {
  ASSERT_NE(p.q.get(), nullptr);
  ASSERT_NE(p.out.get(), nullptr);
  const int64_t n = p.shape.NumElements();
  ASSERT_TRUE(FillRandomNormal(p.q.get(), p.dtype, n, p.seed, nullptr).ok());
  ASSERT_TRUE(FillRandomNormal(p.k.get(), p.dtype, n, p.seed + 1, nullptr).ok());
  ASSERT_TRUE(FillRandomNormal(p.v.get(), p.dtype, n, p.seed + 2, nullptr).ok());
  DeviceBuffer ref(n * sizeof(float));
  ASSERT_TRUE(AttentionGpuReference(p.Args(), static_cast<float*>(ref.get()), nullptr).ok());
  ATTN_ASSERT_CUDA(cudaDeviceSynchronize());
  std::vector<float> host = ref.ToHost<float>();
  ASSERT_EQ(static_cast<int64_t>(host.size()), n);
  p.reference.assign(host.begin(), host.end());
}

// Runs `kernel` on the problem and checks every element was written and the
// relative L2 error is under 1e-2.
void CheckKernel(const KernelInfo& kernel, DeviceProblem& p) {
  SCOPED_TRACE(kernel.name + " " + p.Describe());
  ATTN_ASSERT_CUDA(cudaMemset(p.out.get(), 0xff, p.out.bytes()));  // 0xffff: NaN in fp16 and bf16
  const absl::Status st = Forward(p.Args(), kernel.name, nullptr);
  ASSERT_TRUE(st.ok()) << st;
  ATTN_ASSERT_CUDA(cudaDeviceSynchronize());
  const std::vector<uint16_t> out = p.out.ToHost<uint16_t>();
  ASSERT_EQ(out.size(), p.reference.size());
  EXPECT_EQ(testing::CountNonFinite(out, p.dtype), 0) << "unwritten or non-finite outputs";
  const double err = testing::RelativeL2Error(out, p.dtype, p.reference);
  EXPECT_LT(err, 1e-2);
  std::printf("  %-26s %s rel_err %.2e\n", kernel.name.c_str(), p.Describe().c_str(), err);
}

std::vector<KernelInfo> AllGpuKernels() {
  std::vector<KernelInfo> kernels;
  for (KernelInfo& k : ListKernels()) {
    if (k.backend == Backend::kCuda) kernels.push_back(std::move(k));
  }
  for (KernelInfo& k : ListTuningCandidates()) kernels.push_back(std::move(k));
  return kernels;
}

class GpuKernelsTest : public ::testing::TestWithParam<DType> {
 protected:
  void SetUp() override { ATTN_SKIP_WITHOUT_GPU(); }
};

// The float32 GPU reference itself, against float64 on the CPU.
TEST_P(GpuKernelsTest, GpuReferenceMatchesFloat64) {
  for (const Shape& shape : {Shape{1, 128, 1, 128}, Shape{2, 192, 3, 128}}) {
    DeviceProblem p(shape, GetParam(), 0.0f);
    ASSERT_NO_FATAL_FAILURE(Prepare(p));
    const int64_t n = shape.NumElements();
    std::vector<uint16_t> q = p.q.ToHost<uint16_t>(), k = p.k.ToHost<uint16_t>(),
                          v = p.v.ToHost<uint16_t>();
    std::vector<float> qf(n), kf(n), vf(n);
    ToFloat(q.data(), p.dtype, n, qf.data());
    ToFloat(k.data(), p.dtype, n, kf.data());
    ToFloat(v.data(), p.dtype, n, vf.data());
    const std::vector<double> exact =
        AttentionNaiveF64(qf.data(), kf.data(), vf.data(), shape, 1.0 / std::sqrt(128.0));
    double diff = 0, norm = 0;
    for (int64_t i = 0; i < n; ++i) {
      diff += (p.reference[i] - exact[i]) * (p.reference[i] - exact[i]);
      norm += exact[i] * exact[i];
    }
    EXPECT_LT(std::sqrt(diff / norm), 1e-5) << p.Describe();
  }
}

// Every kernel at shapes covering batch 1 and > 1, 1 and 16 heads, and
// sequence lengths from 128 to 4096 (each a multiple of every block size).
TEST_P(GpuKernelsTest, EveryKernelMatchesReference) {
  const std::vector<KernelInfo> kernels = AllGpuKernels();
  ASSERT_FALSE(kernels.empty());
  const struct {
    Shape shape;
    float scale;
  } cases[] = {
      {{1, 128, 1, 128}, 0.0f},   {{2, 256, 16, 128}, 0.0f}, {{3, 512, 2, 128}, 0.3f},
      {{1, 1024, 16, 128}, 0.0f}, {{2, 2048, 4, 128}, 0.0f}, {{1, 4096, 16, 128}, 0.0f},
  };
  for (const auto& c : cases) {
    DeviceProblem p(c.shape, GetParam(), c.scale);
    ASSERT_NO_FATAL_FAILURE(Prepare(p));
    for (const KernelInfo& kernel : kernels) {
      ASSERT_EQ(c.shape.seq_len % kernel.seq_multiple, 0) << kernel.name;
      CheckKernel(kernel, p);
    }
  }
}

// Large scores (softmax nearly one-hot) must not overflow the online softmax.
TEST_P(GpuKernelsTest, StableUnderLargeScores) {
  DeviceProblem p({1, 512, 2, 128}, GetParam(), 2.0f);
  ASSERT_NO_FATAL_FAILURE(Prepare(p));
  for (const KernelInfo& kernel : AllGpuKernels()) CheckKernel(kernel, p);
}

// Host pointers handed to a GPU kernel are refused, not dereferenced.
TEST_P(GpuKernelsTest, RefusesHostPointers) {
  const Shape shape{1, 128, 1, 128};
  std::vector<uint16_t> host(shape.NumElements());
  DeviceBuffer device(shape.NumElements() * 2);
  AttentionArgs args;
  args.q = {host.data(), GetParam(), shape};
  args.k = {device.get(), GetParam(), shape};
  args.v = {device.get(), GetParam(), shape};
  args.out = {device.get(), GetParam(), shape};
  const absl::Status st = Forward(args, DefaultKernel().name, nullptr);
  EXPECT_EQ(st.code(), absl::StatusCode::kInvalidArgument) << st;
  EXPECT_NE(st.message().find("q.data"), std::string::npos) << st;
  ATTN_ASSERT_CUDA(cudaDeviceSynchronize());
}

INSTANTIATE_TEST_SUITE_P(AllDTypes, GpuKernelsTest,
                         ::testing::Values(DType::kFloat16, DType::kBFloat16),
                         [](const auto& param_info) {
                           return std::string(DTypeName(param_info.param));
                         });

}  // namespace
}  // namespace attn
