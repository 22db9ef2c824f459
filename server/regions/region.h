// server/regions/region.h
//
// Region: one registered shared-memory region (HoldRegions in
// attention.proto): host memory of a POSIX shared-memory object the server
// mapped, or device memory of a client's CUDA allocation the server opened
// from an IPC handle. Bytes [0, size()) at data().
//
// Lifetime: the registry holds a region from RegisterRegion until it is
// unregistered (or its lease ends); each request that references it holds a
// RegionUse from decoding until its job's `done` has run. The memory is
// unmapped when the last of them lets go (the RegionMemory's destructor), so
// no request ever reads or writes a dangling mapping, whatever the client
// does with its lease meanwhile.
#ifndef ATTN_SERVER_REGIONS_REGION_H_
#define ATTN_SERVER_REGIONS_REGION_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "core/tensor_place.h"

namespace attn::server {

// TensorRef.offset must be a multiple of this (ServerInfo.shared_memory):
// the GPU kernels load 16 bytes at a time, and the CPU kernel's 16-bit and
// float32 elements need less.
inline constexpr int64_t kRegionAlignment = 16;

// What a client registered (the wire's RegionInfo, less requests_using,
// which the front end reads off the region when it lists it).
struct RegionRegistration {
  enum class Kind { kSystem, kCuda };
  std::string name;       // the client's name, unique in its lease
  std::string region_id;  // set by the registry: what TensorRefs name
  Kind kind = Kind::kSystem;
  std::string shm_name;    // kSystem: the POSIX shared-memory object
  std::string ipc_handle;  // kCuda: the cudaIpcMemHandle_t bytes
  int device = -1;         // kCuda: the client's CUDA ordinal
  int64_t offset = 0;
  int64_t byte_size = 0;
};

// Memory a region's bytes live in; destroying it unmaps (and unpins) them.
class RegionMemory {
 public:
  virtual ~RegionMemory() = default;
  virtual char* data() const = 0;  // host pointer, or device pointer when on_device()
  virtual int64_t size() const = 0;
  virtual bool on_device() const = 0;        // a CUDA region (else a system region)
  virtual int device() const { return -1; }  // CUDA ordinal of a CUDA region
  // OK while the memory is still whole. A client may shrink the
  // shared-memory object under a system region (ftruncate): touching the
  // lost pages would kill the server with SIGBUS, so requests check first.
  virtual absl::Status StillWhole() const { return absl::OkStatus(); }
};

class Region {
 public:
  // `info` is what ListRegions reports (name, region_id, what was
  // registered); its requests_using is filled when listed.
  Region(RegionRegistration info, std::string lease_id,
         std::unique_ptr<RegionMemory> memory, std::string description)
      : info_(std::move(info)),
        lease_id_(std::move(lease_id)),
        memory_(std::move(memory)),
        description_(std::move(description)) {}

  const std::string& name() const { return info_.name; }
  const std::string& id() const { return info_.region_id; }
  const RegionRegistration& info() const { return info_; }
  const std::string& lease_id() const { return lease_id_; }
  const RegionMemory& memory() const { return *memory_; }
  // What the client registered, for messages: "system '/attn-x' [0, 4096)".
  const std::string& description() const { return description_; }

  // Requests using the region now.
  int64_t uses() const {
    std::lock_guard<std::mutex> lock(mu_);
    return uses_;
  }
  // Runs `idle` once no request uses the region (at once if none does), on
  // the thread that ends the last use.
  void WhenIdle(std::function<void()> idle) {
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (uses_ > 0) {
        on_idle_.push_back(std::move(idle));
        return;
      }
    }
    idle();
  }

 private:
  friend class RegionUse;
  void AddUse() {
    std::lock_guard<std::mutex> lock(mu_);
    ++uses_;
  }
  void EndUse() {
    std::vector<std::function<void()>> idle;
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (--uses_ > 0) return;
      idle.swap(on_idle_);
    }
    for (auto& f : idle) f();
  }

  const RegionRegistration info_;
  const std::string lease_id_;
  const std::unique_ptr<RegionMemory> memory_;
  const std::string description_;
  mutable std::mutex mu_;
  int64_t uses_ = 0;
  std::vector<std::function<void()>> on_idle_;
};

// A request's hold on a region: keeps its memory mapped and counts as a use.
class RegionUse {
 public:
  RegionUse() = default;
  explicit RegionUse(std::shared_ptr<Region> region) : region_(std::move(region)) {
    if (region_ != nullptr) region_->AddUse();
  }
  RegionUse(RegionUse&& other) noexcept : region_(std::move(other.region_)) {}
  RegionUse& operator=(RegionUse&& other) noexcept {
    if (this != &other) {
      Reset();
      region_ = std::move(other.region_);
    }
    return *this;
  }
  RegionUse(const RegionUse&) = delete;
  RegionUse& operator=(const RegionUse&) = delete;
  ~RegionUse() { Reset(); }

  const Region* get() const { return region_.get(); }
  const Region* operator->() const { return region_.get(); }
  void Reset() {
    if (region_ != nullptr) region_->EndUse();
    region_.reset();
  }

 private:
  std::shared_ptr<Region> region_;
};

}  // namespace attn::server

#endif  // ATTN_SERVER_REGIONS_REGION_H_
