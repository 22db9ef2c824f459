// server/regions/region_backend.h
//
// RegionBackend: what the compute backend does to region memory. A system
// region is mapped the same everywhere (system_region.h); the CUDA backend
// also page-locks it (cudaHostRegister) so its copies to and from the GPU
// are DMA straight from the client's memory, and it alone can open CUDA
// regions (cudaIpcOpenMemHandle). The CPU and transport_only backends use
// HostRegionBackend.
#ifndef ATTN_SERVER_REGIONS_REGION_BACKEND_H_
#define ATTN_SERVER_REGIONS_REGION_BACKEND_H_

#include <cstdint>
#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "regions/region.h"

namespace attn::server {

// Host memory made ready for the backend; destroying it undoes that.
class HostPin {
 public:
  virtual ~HostPin() = default;
};

class RegionBackend {
 public:
  virtual ~RegionBackend() = default;
  // Prepares [data, data + size) (page-aligned) for transfers; null when
  // the backend needs nothing.
  virtual absl::StatusOr<std::unique_ptr<HostPin>> PinHost(void* data, int64_t size) = 0;
  // Whether OpenCudaRegion can succeed here.
  virtual bool cuda_regions() const = 0;
  // Opens bytes [offset, offset + size) of the allocation `ipc_handle`
  // (a cudaIpcMemHandle_t) exported by another process on device `device`.
  virtual absl::StatusOr<std::unique_ptr<RegionMemory>> OpenCudaRegion(
      const std::string& ipc_handle, int device, int64_t offset, int64_t size) = 0;
};

// The CPU backend's: nothing to pin, no CUDA regions.
class HostRegionBackend : public RegionBackend {
 public:
  absl::StatusOr<std::unique_ptr<HostPin>> PinHost(void*, int64_t) override { return nullptr; }
  bool cuda_regions() const override { return false; }
  absl::StatusOr<std::unique_ptr<RegionMemory>> OpenCudaRegion(const std::string&, int, int64_t,
                                                               int64_t) override {
    return absl::FailedPreconditionError(
        "cuda regions need the CUDA backend; this server runs without one (use a system "
        "region)");
  }
};

// The CUDA backend's (backends/cuda_region_backend.cc); HostRegionBackend
// in a build without CUDA.
std::unique_ptr<RegionBackend> CreateCudaRegionBackend();

}  // namespace attn::server

#endif  // ATTN_SERVER_REGIONS_REGION_BACKEND_H_
