// The CUDA backend of a build without CUDA: there is none.
#include "backends/cuda_executor.h"
#include "backends/cuda_session_memory.h"
#include "regions/region_backend.h"

namespace attn::server {

absl::StatusOr<std::vector<std::unique_ptr<Executor>>> CreateCudaExecutors(
    const CudaExecutorOptions&) {
  return absl::FailedPreconditionError(
      "this attn_server was built without CUDA (ATTN_ENABLE_CUDA=OFF or no nvcc); "
      "use --backend=cpu or a CUDA build");
}

std::string CudaVersionString() { return "no CUDA"; }

absl::StatusOr<std::unique_ptr<SessionMemory>> CreateCudaSessionMemory(const DeviceInfo&, int64_t,
                                                                       double, int64_t) {
  return absl::FailedPreconditionError("this attn_server was built without CUDA");
}

std::unique_ptr<RegionBackend> CreateCudaRegionBackend() {
  return std::make_unique<HostRegionBackend>();
}

}  // namespace attn::server
