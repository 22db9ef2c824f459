// The CUDA backend's RegionBackend (regions/region_backend.h). Compiled only
// when ATTN_HAVE_CUDA.
#include <cuda.h>  // types of cuMemGetAddressRange only; reached through the runtime
#include <cuda_runtime.h>

#include <cstring>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <utility>

#include "absl/strings/str_format.h"
#include "backends/cuda_memory.h"
#include "regions/region_backend.h"
#include "core/status_util.h"

namespace attn::server {
namespace {

// cudaHostRegister'ed host memory: copies between it and any device are DMA
// (Portable: page-locked for every device, not only the current one).
class RegisteredHost final : public HostPin {
 public:
  explicit RegisteredHost(void* data) : data_(data) {}
  ~RegisteredHost() override { cudaHostUnregister(data_); }

 private:
  void* const data_;
};

// One allocation of another process opened in this one. A process may open
// a handle once per device, so regions that share an allocation share this
// (IpcCache).
class OpenedIpc {
 public:
  OpenedIpc(void* base, int device) : base_(base), device_(device) {}
  ~OpenedIpc() {
    if (cudaSetDevice(device_) == cudaSuccess) cudaIpcCloseMemHandle(base_);
  }
  char* base() const { return static_cast<char*>(base_); }

 private:
  void* const base_;
  const int device_;
};

class IpcCache {
 public:
  absl::StatusOr<std::shared_ptr<OpenedIpc>> Open(const std::string& handle, int device) {
    std::lock_guard<std::mutex> lock(mu_);
    auto key = std::make_pair(device, handle);
    if (auto it = opened_.find(key); it != opened_.end()) {
      if (std::shared_ptr<OpenedIpc> opened = it->second.lock()) return opened;
    }
    CUDA_RETURN_IF_ERROR(cudaSetDevice(device), device);
    cudaIpcMemHandle_t h;
    std::memcpy(&h, handle.data(), sizeof(h));
    void* base = nullptr;
    const cudaError_t error = cudaIpcOpenMemHandle(&base, h, cudaIpcMemLazyEnablePeerAccess);
    if (error != cudaSuccess) {
      cudaGetLastError();  // not sticky: clear it for the next call
      return absl::InvalidArgumentError(absl::StrFormat(
          "cuda.ipc_handle cannot be opened on cuda:%d: %s (%s); it must come from "
          "cudaIpcGetMemHandle in another process on this host, for memory still allocated",
          device, cudaGetErrorName(error), cudaGetErrorString(error)));
    }
    auto opened = std::make_shared<OpenedIpc>(base, device);
    opened_[key] = opened;
    return opened;
  }

 private:
  std::mutex mu_;
  std::map<std::pair<int, std::string>, std::weak_ptr<OpenedIpc>> opened_;
};

class CudaRegion final : public RegionMemory {
 public:
  CudaRegion(std::shared_ptr<OpenedIpc> opened, int64_t offset, int64_t size, int device)
      : opened_(std::move(opened)), offset_(offset), size_(size), device_(device) {}
  char* data() const override { return opened_->base() + offset_; }
  int64_t size() const override { return size_; }
  bool on_device() const override { return true; }
  int device() const override { return device_; }

 private:
  const std::shared_ptr<OpenedIpc> opened_;
  const int64_t offset_, size_;
  const int device_;
};

class CudaRegionBackend final : public RegionBackend {
 public:
  absl::StatusOr<std::unique_ptr<HostPin>> PinHost(void* data, int64_t size) override {
    const cudaError_t error =
        cudaHostRegister(data, static_cast<size_t>(size), cudaHostRegisterPortable);
    if (error != cudaSuccess) {
      cudaGetLastError();
      return absl::ResourceExhaustedError(absl::StrFormat(
          "cannot page-lock the system region's %d bytes for DMA (cudaHostRegister: %s); the "
          "host's locked-memory limit may be too low (ulimit -l)",
          size, cudaGetErrorString(error)));
    }
    return std::make_unique<RegisteredHost>(data);
  }

  bool cuda_regions() const override { return true; }

  absl::StatusOr<std::unique_ptr<RegionMemory>> OpenCudaRegion(const std::string& ipc_handle,
                                                               int device, int64_t offset,
                                                               int64_t size) override {
    if (ipc_handle.size() != sizeof(cudaIpcMemHandle_t)) {
      return absl::InvalidArgumentError(
          absl::StrFormat("cuda.ipc_handle has %d bytes; a cudaIpcMemHandle_t has %d",
                          ipc_handle.size(), sizeof(cudaIpcMemHandle_t)));
    }
    int devices = 0;
    CUDA_RETURN_IF_ERROR(cudaGetDeviceCount(&devices), -1);
    if (device < 0 || device >= devices) {
      return absl::InvalidArgumentError(absl::StrFormat(
          "cuda.device_ordinal is %d; this server sees %d CUDA devices", device, devices));
    }
    if (offset < 0 || size <= 0) {
      return absl::InvalidArgumentError(absl::StrFormat(
          "cuda.offset (%d) must be >= 0 and cuda.byte_size (%d) > 0", offset, size));
    }
    // TensorRef offsets are aligned relative to the region's start, which
    // the kernel then uses in place: it must be aligned too (kRegionAlignment).
    if (offset % kRegionAlignment != 0) {
      return absl::InvalidArgumentError(
          absl::StrFormat("cuda.offset is %d; it must be a multiple of %d (the kernel reads and "
                          "writes a CUDA region in place, %d bytes at a time)",
                          offset, kRegionAlignment, kRegionAlignment));
    }
    ASSIGN_OR_RETURN(std::shared_ptr<OpenedIpc> opened, cache_.Open(ipc_handle, device));
    // The allocation's extent bounds the region: a reference past it would
    // make the kernel fault, which breaks the device for every client.
    ASSIGN_OR_RETURN(const int64_t extent, AllocationBytes(opened->base(), device));
    if (offset > extent || size > extent - offset) {
      return absl::InvalidArgumentError(absl::StrFormat(
          "cuda region [%d, %d) is past the end of its allocation, which has %d bytes "
          "(cuda.offset + cuda.byte_size must be <= it)",
          offset, offset + size, extent));
    }
    return std::make_unique<CudaRegion>(std::move(opened), offset, size, device);
  }

 private:
  // Bytes of the allocation starting at `base` (cuMemGetAddressRange, from
  // the driver through the runtime: the server links no libcuda itself).
  static absl::StatusOr<int64_t> AllocationBytes(char* base, int device) {
    using GetRange = CUresult (*)(CUdeviceptr*, size_t*, CUdeviceptr);
    static GetRange get_range = []() -> GetRange {
      void* fn = nullptr;
      cudaDriverEntryPointQueryResult found{};
      if (cudaGetDriverEntryPointByVersion("cuMemGetAddressRange", &fn, 12000, cudaEnableDefault,
                                           &found) != cudaSuccess ||
          found != cudaDriverEntryPointSuccess) {
        return nullptr;
      }
      return reinterpret_cast<GetRange>(fn);
    }();
    if (get_range == nullptr) {
      return absl::InternalError("cuMemGetAddressRange is not available from the driver");
    }
    CUdeviceptr start = 0;
    size_t bytes = 0;
    CUDA_RETURN_IF_ERROR(cudaSetDevice(device), device);
    if (get_range(&start, &bytes, reinterpret_cast<CUdeviceptr>(base)) != CUDA_SUCCESS) {
      return absl::InternalError("cuMemGetAddressRange failed on an opened IPC allocation");
    }
    return static_cast<int64_t>(bytes - (reinterpret_cast<CUdeviceptr>(base) - start));
  }

  IpcCache cache_;
};

}  // namespace

std::unique_ptr<RegionBackend> CreateCudaRegionBackend() {
  return std::make_unique<CudaRegionBackend>();
}

}  // namespace attn::server
