// The server's kernel catalog as a server built with ATTN_SERVER_LADDER=OFF
// has it (backends/kernel_catalog.cc compiled without the ladder, linked
// with attn::kernels alone): production kernels only, the ladder's names
// unknown, a CUDA kernel asked of the wrong backend or build refused with
// FAILED_PRECONDITION, and the per-device handles of ForCudaDevices.
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "attn/attention.h"
#include "attn/device.h"
#include "backends/kernel_catalog.h"

namespace attn::server {
namespace {

const AttentionProblem kProblem = AttentionProblem::SelfAttention(1, 128, 2, 128);

bool Contains(absl::string_view text, absl::string_view part) {
  return text.find(part) != absl::string_view::npos;
}

TEST(ProductionCatalogTest, CpuCatalogRefusesCudaAndLadderNames) {
  absl::StatusOr<KernelCatalog> catalog = KernelCatalog::ForBackend(Backend::kCpu);
  ASSERT_TRUE(catalog.ok()) << catalog.status();
  ASSERT_EQ(catalog->kernels().size(), 2u);
  EXPECT_EQ(catalog->default_kernel().info().name, kCpuFlashKernelName);
  const absl::StatusOr<const KernelHandle*> flash = catalog->Resolve(kProductionKernelName, kProblem);
  ASSERT_EQ(flash.status().code(), absl::StatusCode::kFailedPrecondition) << flash.status();
  EXPECT_TRUE(Contains(flash.status().message(), BuiltWithCuda() ? "this server runs the cpu backend"
                                                                : "is a CUDA kernel"))
      << flash.status();
  EXPECT_EQ(catalog->Resolve("k01_base", kProblem).status().code(), absl::StatusCode::kNotFound);
}

TEST(ProductionCatalogTest, CudaCatalogHasFlashFwdOnly) {
  absl::StatusOr<KernelCatalog> catalog = KernelCatalog::ForBackend(Backend::kCuda);
  if (!BuiltWithCuda()) {
    EXPECT_EQ(catalog.status().code(), absl::StatusCode::kFailedPrecondition) << catalog.status();
    return;
  }
  ASSERT_TRUE(catalog.ok()) << catalog.status();
  std::vector<std::string> names;
  for (const KernelHandle& k : catalog->kernels()) names.push_back(k.info().name);
  EXPECT_EQ(names, std::vector<std::string>{kProductionKernelName});
  EXPECT_EQ(catalog->default_kernel().info().name, kProductionKernelName);
  EXPECT_EQ(catalog->Resolve("k07_autotuned", kProblem).status().code(),
            absl::StatusCode::kNotFound);
}

TEST(ProductionCatalogTest, PerDeviceHandlesSayWhyADeviceCannotRunAKernel) {
  const DeviceInfo turing{3, "Fake T4", 7, 5, 40, 16LL << 30};  // sm_75: below every family
  absl::StatusOr<KernelCatalog> catalog = KernelCatalog::ForCudaDevices({turing});
  if (!BuiltWithCuda()) {
    EXPECT_EQ(catalog.status().code(), absl::StatusCode::kFailedPrecondition) << catalog.status();
    return;
  }
  ASSERT_TRUE(catalog.ok()) << catalog.status();
  const KernelHandle& flash = catalog->default_kernel();
  const absl::StatusOr<const KernelHandle*> on_turing = catalog->OnDevice(flash, 3);
  ASSERT_EQ(on_turing.status().code(), absl::StatusCode::kFailedPrecondition)
      << on_turing.status();
  EXPECT_TRUE(Contains(on_turing.status().message(), "compute capability 7.5"))
      << on_turing.status();
  const absl::StatusOr<const KernelHandle*> elsewhere = catalog->OnDevice(flash, 0);
  EXPECT_EQ(elsewhere.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_TRUE(Contains(elsewhere.status().message(), "no kernel for device 0"))
      << elsewhere.status();
  const KernelHandle stranger = flash;  // a copy: not the catalog's
  EXPECT_EQ(catalog->OnDevice(stranger, 3).status().code(), absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace attn::server
