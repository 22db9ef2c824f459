// server/regions/region_registry.h
//
// RegionRegistry: the leases and regions of HoldRegions/RegisterRegion
// (attention.proto), thread-safe.
//
// A lease groups the regions of one client session; ending it (its call
// ended) unregisters them all. Leases and regions are named by ids made
// from 128 random bits (the kernel's CSPRNG): a region is reachable only by
// whoever was told its id, unlike Triton's regions, which are global by
// name. Unregistering takes a region out of the registry at once (new
// references get NOT_FOUND); requests already holding a RegionUse keep its
// memory mapped until they end.
#ifndef ATTN_SERVER_REGIONS_REGION_REGISTRY_H_
#define ATTN_SERVER_REGIONS_REGION_REGISTRY_H_

#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <vector>

#include "absl/functional/function_ref.h"
#include "absl/status/statusor.h"
#include "regions/region.h"

namespace attn::server {

// 32 hex digits from the kernel's CSPRNG (getrandom).
std::string RandomId();

class RegionRegistry {
 public:
  explicit RegionRegistry(int max_regions_per_lease) : max_per_lease_(max_regions_per_lease) {}
  int max_regions_per_lease() const { return max_per_lease_; }

  // A new lease, empty.
  std::string OpenLease();
  // Unregisters every region of the lease and forgets it; no-op if unknown.
  // Returns the regions taken out (still mapped while requests use them).
  std::vector<std::shared_ptr<Region>> EndLease(const std::string& lease_id);

  // Registers `name` in the lease, with memory from `map` (called without
  // the registry's lock: mapping and page-locking take time). NOT_FOUND for
  // an unknown lease, ALREADY_EXISTS for a taken name, RESOURCE_EXHAUSTED
  // past max_regions_per_lease, or map's error. `info` carries what was
  // registered; its region_id is set here.
  using MapFn = absl::FunctionRef<absl::StatusOr<std::unique_ptr<RegionMemory>>()>;
  absl::StatusOr<std::shared_ptr<Region>> Register(const std::string& lease_id,
                                                   RegionRegistration info,
                                                   const std::string& description, MapFn map);

  // Takes the region out of the registry (NOT_FOUND if the lease or name
  // is unknown); the caller may wait for it to be idle (Region::WhenIdle).
  absl::StatusOr<std::shared_ptr<Region>> Unregister(const std::string& lease_id,
                                                     const std::string& name);

  // The lease's regions, by name (NOT_FOUND for an unknown lease).
  absl::StatusOr<std::vector<std::shared_ptr<Region>>> List(const std::string& lease_id) const;

  // A request's hold on the region with this id, or NOT_FOUND naming `field`.
  absl::StatusOr<RegionUse> Use(const std::string& region_id, const std::string& field) const;

  int64_t regions() const;
  int64_t leases() const;

 private:
  struct Lease {
    std::map<std::string, std::shared_ptr<Region>> by_name;
    std::set<std::string> pending;  // names being mapped now
  };
  const int max_per_lease_;
  mutable std::mutex mu_;
  std::map<std::string, Lease> leases_;
  std::map<std::string, std::shared_ptr<Region>> by_id_;
};

}  // namespace attn::server

#endif  // ATTN_SERVER_REGIONS_REGION_REGISTRY_H_
