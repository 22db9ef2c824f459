#include "regions/region_registry.h"

#include <sys/random.h>

#include <cstdio>
#include <utility>

#include "absl/strings/escaping.h"
#include "absl/strings/str_format.h"

namespace attn::server {

std::string RandomId() {
  unsigned char bytes[16];
  size_t got = 0;
  while (got < sizeof(bytes)) {
    const ssize_t n = getrandom(bytes + got, sizeof(bytes) - got, 0);
    if (n > 0) got += static_cast<size_t>(n);
    // EINTR: try again; getrandom without GRND_NONBLOCK blocks only until the
    // pool is initialized at boot.
  }
  return absl::BytesToHexString(
      absl::string_view(reinterpret_cast<const char*>(bytes), sizeof(bytes)));
}

std::string RegionRegistry::OpenLease() {
  std::string id = RandomId();
  std::lock_guard<std::mutex> lock(mu_);
  leases_[id];
  return id;
}

std::vector<std::shared_ptr<Region>> RegionRegistry::EndLease(const std::string& lease_id) {
  std::vector<std::shared_ptr<Region>> ended;
  std::lock_guard<std::mutex> lock(mu_);
  auto it = leases_.find(lease_id);
  if (it == leases_.end()) return ended;
  for (auto& [name, region] : it->second.by_name) {
    by_id_.erase(region->id());
    ended.push_back(std::move(region));
  }
  leases_.erase(it);
  return ended;
}

namespace {
absl::Status UnknownLease(const std::string& lease_id) {
  return absl::NotFoundError(absl::StrFormat(
      "lease_id '%s' is not an open lease of this server (HoldRegions gives one; it ends with "
      "that call)",
      absl::CHexEscape(lease_id.substr(0, 64))));
}
}  // namespace

absl::StatusOr<std::shared_ptr<Region>> RegionRegistry::Register(
    const std::string& lease_id, RegionRegistration info, const std::string& description,
    MapFn map) {
  const std::string name = info.name;
  {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = leases_.find(lease_id);
    if (it == leases_.end()) return UnknownLease(lease_id);
    Lease& lease = it->second;
    if (lease.by_name.count(name) > 0 || lease.pending.count(name) > 0) {
      return absl::AlreadyExistsError(absl::StrFormat(
          "name '%s' is already a region of this lease; unregister it first", name));
    }
    if (static_cast<int64_t>(lease.by_name.size() + lease.pending.size()) >= max_per_lease_) {
      return absl::ResourceExhaustedError(absl::StrFormat(
          "the lease has %d regions, the most one lease may hold (--max_regions_per_lease)",
          max_per_lease_));
    }
    lease.pending.insert(name);
  }
  absl::StatusOr<std::unique_ptr<RegionMemory>> memory = map();
  std::lock_guard<std::mutex> lock(mu_);
  auto it = leases_.find(lease_id);
  if (it != leases_.end()) it->second.pending.erase(name);
  if (!memory.ok()) return memory.status();
  // The lease ended while the memory was being mapped: nothing to keep.
  if (it == leases_.end()) return UnknownLease(lease_id);
  info.region_id = RandomId();
  auto region =
      std::make_shared<Region>(std::move(info), lease_id, *std::move(memory), description);
  it->second.by_name[name] = region;
  by_id_[region->id()] = region;
  return region;
}

absl::StatusOr<std::shared_ptr<Region>> RegionRegistry::Unregister(const std::string& lease_id,
                                                                   const std::string& name) {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = leases_.find(lease_id);
  if (it == leases_.end()) return UnknownLease(lease_id);
  auto found = it->second.by_name.find(name);
  if (found == it->second.by_name.end()) {
    return absl::NotFoundError(
        absl::StrFormat("name '%s' is not a region of this lease", absl::CHexEscape(name)));
  }
  std::shared_ptr<Region> region = std::move(found->second);
  it->second.by_name.erase(found);
  by_id_.erase(region->id());
  return region;
}

absl::StatusOr<std::vector<std::shared_ptr<Region>>> RegionRegistry::List(
    const std::string& lease_id) const {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = leases_.find(lease_id);
  if (it == leases_.end()) return UnknownLease(lease_id);
  std::vector<std::shared_ptr<Region>> regions;
  for (const auto& [name, region] : it->second.by_name) regions.push_back(region);
  return regions;
}

absl::StatusOr<RegionUse> RegionRegistry::Use(const std::string& region_id,
                                              const std::string& field) const {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = by_id_.find(region_id);
  if (it == by_id_.end()) {
    return absl::NotFoundError(absl::StrFormat(
        "%s.region_id '%s' is not a registered region (unregistered, its lease ended, or never "
        "registered with this server)",
        field, absl::CHexEscape(region_id.substr(0, 64))));
  }
  return RegionUse(it->second);
}

int64_t RegionRegistry::regions() const {
  std::lock_guard<std::mutex> lock(mu_);
  return static_cast<int64_t>(by_id_.size());
}

int64_t RegionRegistry::leases() const {
  std::lock_guard<std::mutex> lock(mu_);
  return static_cast<int64_t>(leases_.size());
}

}  // namespace attn::server
