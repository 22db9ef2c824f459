// server/frontend/region_refs.h
//
// ResolveRegionRefs: turns an AttendRequest's TensorRefs (q_ref ... lse_ref)
// into the job's tensors and output places, holding each referenced region
// for the job's lifetime. Every reference is checked before the request may
// queue:
//   NOT_FOUND            the region_id is not registered (or was
//                        unregistered, or its lease ended)
//   FAILED_PRECONDITION  shared memory is off (--allow_shared_memory), or a
//                        CUDA region on a backend without CUDA
//   INVALID_ARGUMENT     both the inline field and its reference set; an
//                        lse_ref without return_lse; byte_size not exactly
//                        the tensor's size; an offset that is negative or
//                        not a multiple of kRegionAlignment (region.h); a range past the
//                        region's end; an output overlapping an input
#ifndef ATTN_SERVER_FRONTEND_REGION_REFS_H_
#define ATTN_SERVER_FRONTEND_REGION_REFS_H_

#include <cstdint>

#include "absl/status/status.h"
#include "attnserve/v1/attention.pb.h"
#include "regions/region.h"
#include "regions/region_registry.h"
#include "core/job.h"

namespace attn::server {

// The regions one request holds, released when it is destroyed.
struct RegionHolds {
  RegionUse q, k, v, out, lse;
};

bool HasRegionRefs(const attnserve::v1::AttendRequest& request);

// For each reference of `request`: checks it against `spec` (decoded from
// the same request) and `registry` (null: shared memory is off), points
// job->{q,k,v} (sources) and job->{out,lse} (destinations) at the region's
// bytes, and holds the region in *holds. `inline_bytes` are the sizes of
// the inline q, k, v.
absl::Status ResolveRegionRefs(const attnserve::v1::AttendRequest& request,
                               const std::array<int64_t, 3>& inline_bytes,
                               const RegionRegistry* registry, const RequestSpec& spec, Job* job,
                               RegionHolds* holds);

}  // namespace attn::server

#endif  // ATTN_SERVER_FRONTEND_REGION_REFS_H_
