// server/regions/system_region.h
//
// Maps a system region: bytes [offset, offset + size) of the POSIX
// shared-memory object `shm_name` (shm_open), read-write and shared, so the
// server reads the client's inputs and writes its outputs in place. The
// mapping holds the object open even if the client unlinks it, and keeps a
// descriptor to it so each request can check the object was not shrunk
// under the region (RegionMemory::StillWhole).
//
// Errors name the field: NOT_FOUND for an object that does not exist,
// PERMISSION_DENIED when the server may not open it, INVALID_ARGUMENT for
// a bad name, an offset that is not page-aligned, or a range past the
// object's end.
#ifndef ATTN_SERVER_REGIONS_SYSTEM_REGION_H_
#define ATTN_SERVER_REGIONS_SYSTEM_REGION_H_

#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "regions/region.h"
#include "regions/region_backend.h"

namespace attn::server {

absl::StatusOr<std::unique_ptr<RegionMemory>> MapSystemRegion(const std::string& shm_name,
                                                              int64_t offset, int64_t size,
                                                              RegionBackend& backend);

}  // namespace attn::server

#endif  // ATTN_SERVER_REGIONS_SYSTEM_REGION_H_
