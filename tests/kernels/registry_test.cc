// The registry of attn::kernels without the ladder (this binary does not
// link attn::ladder): what a production-only program lists and resolves;
// kernel families and their choice per device; resolution for a device the
// kernels cannot run on; KernelHandle's Run (checks) against Launch (none)
// and the workspace; a library registered explicitly. Runs without a GPU.
#include <cstdint>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "attn/attention.h"
#include "attn/device.h"
#include "attn/kernel_family.h"
#include "attn/kernel_library.h"
#include "attn/validate.h"
#include "test_util.h"

namespace attn {
namespace {

constexpr char kFakeKernelName[] = "registry_test_fake";

bool Contains(const std::string& text, const std::string& part) {
  return text.find(part) != std::string::npos;
}

TEST(RegistryTest, ProductionOnlyListsTheCpuKernelsAndFlashFwd) {
  const std::vector<KernelInfo> kernels = ListKernels();
  ASSERT_FALSE(kernels.empty());
  EXPECT_EQ(kernels.front().name, kCpuKernelName);
  bool has_flash_fwd = false;
  for (const KernelInfo& k : kernels) {
    EXPECT_EQ(k.ladder_step, 0) << k.name << ": no ladder kernel without attn::ladder";
    // The fake library of RegisteredLibraryIsListedAndResolved, if it ran first.
    if (k.name == kFakeKernelName) continue;
    EXPECT_TRUE(k.name == kCpuKernelName || k.name == kCpuFlashKernelName ||
                k.name == kProductionKernelName)
        << k.name;
    has_flash_fwd = has_flash_fwd || k.name == kProductionKernelName;
  }
  EXPECT_EQ(has_flash_fwd, BuiltWithCuda());
  EXPECT_TRUE(ListTuningCandidates().empty());
  const absl::StatusOr<KernelHandle> ladder = ResolveKernel("k01_base");
  EXPECT_EQ(ladder.status().code(), absl::StatusCode::kNotFound) << ladder.status();
}

TEST(RegistryTest, FlashFwdIsACudaKernelEvenWithoutCuda) {
  const absl::StatusOr<KernelInfo> info = FindKernel(kProductionKernelName);
  if (!BuiltWithCuda()) {
    ASSERT_EQ(info.status().code(), absl::StatusCode::kFailedPrecondition) << info.status();
    EXPECT_TRUE(Contains(std::string(info.status().message()), "is a CUDA kernel"))
        << info.status();
    return;
  }
  ASSERT_TRUE(info.ok()) << info.status();
  EXPECT_EQ(info->backend, Backend::kCuda);
  EXPECT_EQ(info->family, "ampere");
  EXPECT_EQ(info->caps.min_compute_capability, 80);
  EXPECT_EQ(info->caps.head_dims, (std::vector<int>{64, 96, 128, 192, 256}));
  EXPECT_EQ(info->caps.seq_multiple, 1);
  EXPECT_EQ(info->block_m, 128);  // the head_dim-128 tile
  EXPECT_EQ(info->block_n, 64);
}

TEST(KernelFamilyTest, TheTableHasThePortableAmpereFamily) {
  const KernelFamily* ampere = FindKernelFamily("ampere");
  ASSERT_NE(ampere, nullptr);
  EXPECT_EQ(ampere->min_compute_capability, 80);
  EXPECT_FALSE(ampere->arch_specific);
  EXPECT_FALSE(ampere->features.empty());
  // CI and build.sh compile for architectures from 80 up.
  EXPECT_EQ(ampere->built(), BuiltWithCuda()) << "architectures: '" << ampere->architectures << "'";
  EXPECT_EQ(FindKernelFamily("no_such_family"), nullptr);
}

TEST(KernelFamilyTest, EachDeviceGetsTheBestFamilyItRuns) {
  const KernelFamily ampere{"ampere", 80, false, "mma.sync", "80 90"};
  const KernelFamily hopper{"hopper", 90, true, "wgmma", "90a"};
  const KernelFamily later{"later", 100, false, "", ""};  // not built
  const std::vector<const KernelFamily*> families = {&ampere, &hopper, &later};
  EXPECT_EQ(BestFamily(families, 75), nullptr);
  EXPECT_EQ(BestFamily(families, 80), &ampere);
  EXPECT_EQ(BestFamily(families, 86), &ampere);
  EXPECT_EQ(BestFamily(families, 89), &ampere);
  EXPECT_EQ(BestFamily(families, 90), &hopper);
  // Arch-specific code runs on its own capability only; a family not built
  // runs nowhere.
  EXPECT_EQ(BestFamily(families, 100), &ampere);
  EXPECT_EQ(BestFamily({&hopper}, 80), nullptr);
  EXPECT_TRUE(ampere.RunsOn(120));
  EXPECT_FALSE(hopper.RunsOn(100));
}

TEST(RegistryTest, DeviceBelowTheFamiliesIsRefusedNamingBoth) {
  const DeviceInfo turing{0, "Fake T4", 7, 5, 40, 16LL << 30};  // sm_75: below every family
  const absl::StatusOr<KernelHandle> kernel = ResolveKernel(kProductionKernelName, turing);
  ASSERT_EQ(kernel.status().code(), absl::StatusCode::kFailedPrecondition) << kernel.status();
  const std::string message(kernel.status().message());
  if (BuiltWithCuda()) {
    EXPECT_TRUE(Contains(message, "device 0 (Fake T4, compute capability 7.5)")) << message;
    EXPECT_TRUE(Contains(message, "ampere needs compute capability 8.0 or newer")) << message;
  } else {
    EXPECT_TRUE(Contains(message, "is a CUDA kernel")) << message;
  }
  // The CPU kernel runs whatever the device.
  const absl::StatusOr<KernelHandle> cpu = ResolveKernel(kCpuKernelName, turing);
  ASSERT_TRUE(cpu.ok()) << cpu.status();
  EXPECT_EQ(cpu->device(), -1);
}

TEST(KernelHandleTest, RunChecksAndLaunchRunsWhatItIsGiven) {
  const absl::StatusOr<KernelHandle> cpu = ResolveKernel(kCpuKernelName);
  ASSERT_TRUE(cpu.ok()) << cpu.status();
  EXPECT_EQ(cpu->WorkspaceBytes(AttentionProblem::SelfAttention(1, 64, 2, 64)), 0);
  EXPECT_EQ(cpu->MaxWorkspaceBytes(), 0);
  const AttentionProblem p = testing::DenseProblem(1, 33, 47, 4, 2, 64, /*causal=*/true);
  const testing::ProblemInputs in = testing::MakeProblemInputs(p, DType::kBFloat16, testing::FreshSeed());
  std::vector<uint16_t> run_out(p.QElements(), testing::kPoisonBits);
  std::vector<uint16_t> launch_out(p.QElements(), testing::kPoisonBits);
  std::vector<float> run_lse(p.LseElements()), launch_lse(p.LseElements());
  AttentionArgs args = AttentionArgs::Contiguous(p, in.dtype, in.q.data(), in.k.data(),
                                                 in.v.data(), run_out.data(), run_lse.data());

  AttentionArgs bad = args;
  bad.k = nullptr;
  const absl::Status refused = cpu->Run(bad);
  EXPECT_EQ(refused.code(), absl::StatusCode::kInvalidArgument) << refused;
  EXPECT_TRUE(Contains(std::string(refused.message()), "k is null")) << refused;
  for (uint16_t bits : run_out) ASSERT_EQ(bits, testing::kPoisonBits) << "Run refused, yet wrote";

  ASSERT_TRUE(cpu->Run(args).ok());
  args.out = launch_out.data();
  args.lse = launch_lse.data();
  ASSERT_TRUE(cpu->Launch(args).ok());
  EXPECT_EQ(run_out, launch_out);
  EXPECT_EQ(run_lse, launch_lse);
}

// A kernel that would use scratch memory: the workspace is optional, but
// what is given must be usable and a forced split count needs its bytes.
int64_t NeedsScratch(const void*, const AttentionProblem&) { return 256; }
int64_t MostScratch(const void*) { return 4096; }

int launches = 0;

absl::Status CountLaunch(const void*, const KernelInfo&, const AttentionArgs&, CUstream_st*) {
  ++launches;
  return absl::OkStatus();
}

TEST(KernelHandleTest, RunChecksTheWorkspaceGiven) {
  launches = 0;
  KernelInfo info = *FindKernel(kCpuKernelName);
  info.name = "scratch_test";
  const KernelHandle kernel(
      info, KernelHandle::Entry{&CountLaunch, nullptr, &NeedsScratch, &MostScratch}, nullptr);
  const AttentionProblem p = AttentionProblem::SelfAttention(1, 4, 1, 8);
  EXPECT_EQ(kernel.WorkspaceBytes(p), 256);
  EXPECT_EQ(kernel.MaxWorkspaceBytes(), 4096);
  std::vector<uint16_t> q(p.QElements()), out(p.QElements());
  AttentionArgs args = AttentionArgs::Contiguous(p, DType::kFloat16, q.data(), q.data(),
                                                 q.data(), out.data());
  EXPECT_TRUE(kernel.Run(args).ok());  // none given: the kernel runs without
  EXPECT_EQ(launches, 1);
  alignas(16) char scratch[4096 + 16];
  args.workspace = scratch + 2;
  args.workspace_bytes = 256;
  absl::Status st = kernel.Run(args);
  EXPECT_EQ(st.code(), absl::StatusCode::kInvalidArgument) << st;
  EXPECT_TRUE(Contains(std::string(st.message()), "16-byte aligned")) << st;
  args.workspace = nullptr;
  args.num_splits = 4;
  st = kernel.Run(args);
  EXPECT_EQ(st.code(), absl::StatusCode::kInvalidArgument) << st;
  EXPECT_TRUE(Contains(std::string(st.message()), "(workspace is null); num_splits = 4 needs " +
                                                      std::to_string(SplitKvWorkspaceBytes(p, 4))))
      << st;
  args.num_splits = -1;
  st = kernel.Run(args);
  EXPECT_TRUE(Contains(std::string(st.message()), "num_splits is -1")) << st;
  EXPECT_EQ(launches, 1);
  args.num_splits = 4;
  args.workspace = scratch;
  args.workspace_bytes = SplitKvWorkspaceBytes(p, 4);
  EXPECT_TRUE(kernel.Run(args).ok());
  EXPECT_EQ(launches, 2);
}

class FakeLibrary : public KernelLibrary {
 public:
  std::vector<KernelInfo> List() const override { return {Info()}; }
  absl::StatusOr<KernelHandle> Resolve(absl::string_view name,
                                       const DeviceInfo*) const override {
    if (name != kFakeKernelName) return absl::NotFoundError(name);
    return KernelHandle(Info(), &CountLaunch, nullptr);
  }

 private:
  static KernelInfo Info() {
    KernelInfo info = *FindKernel(kCpuKernelName);
    info.name = kFakeKernelName;
    return info;
  }
};

TEST(RegistryTest, RegisteredLibraryIsListedAndResolved) {
  static const FakeLibrary library;
  RegisterKernelLibrary(&library);
  RegisterKernelLibrary(&library);  // once only
  const std::vector<KernelInfo> kernels = ListKernels();
  int found = 0;
  for (size_t i = 0; i < kernels.size(); ++i) {
    if (kernels[i].name != kFakeKernelName) continue;
    ++found;
    EXPECT_EQ(i, 2u) << "after the CPU kernels, before the production GPU kernel";
  }
  EXPECT_EQ(found, 1);
  EXPECT_TRUE(ResolveKernel(kFakeKernelName).ok());
  EXPECT_EQ(ResolveKernel("unknown_kernel").status().code(), absl::StatusCode::kNotFound);
}

}  // namespace
}  // namespace attn
