// The CUDA backend of a build without CUDA: there is none.
#include "backends/cuda_executor.h"
#include "regions/region_backend.h"

namespace attn::server {

absl::StatusOr<std::vector<std::unique_ptr<Executor>>> CreateCudaExecutors(
    const CudaExecutorOptions&) {
  return absl::FailedPreconditionError(
      "this attn_server was built without CUDA (ATTN_ENABLE_CUDA=OFF or no nvcc); "
      "use --backend=cpu or a CUDA build");
}

std::string CudaVersionString() { return "no CUDA"; }

std::unique_ptr<RegionBackend> CreateCudaRegionBackend() {
  return std::make_unique<HostRegionBackend>();
}

}  // namespace attn::server
