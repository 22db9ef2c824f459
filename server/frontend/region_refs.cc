#include "frontend/region_refs.h"

#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_format.h"
#include "frontend/tensor_codec.h"
#include "core/status_util.h"

namespace attn::server {
namespace {

namespace pb = ::attnserve::v1;

// One reference of the request, for the checks.
struct Ref {
  const char* field;         // "q_ref", ...
  const pb::TensorRef* ref;  // null when the request has none
  int64_t needed;            // bytes the tensor has
  RegionUse* hold;           // where the request holds the region
  bool output;
  const Region* region = nullptr;  // resolved
};

absl::Status CheckRef(Ref& r, const RegionRegistry& registry) {
  const pb::TensorRef& ref = *r.ref;
  ASSIGN_OR_RETURN(*r.hold, registry.Use(ref.region_id(), r.field));
  r.region = r.hold->get();
  const Region& region = *r.region;
  if (ref.byte_size() != r.needed) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "%s.byte_size is %d; the tensor has %d bytes", r.field, ref.byte_size(), r.needed));
  }
  if (ref.offset() < 0 || ref.offset() % kRegionAlignment != 0) {
    return absl::InvalidArgumentError(
        absl::StrFormat("%s.offset is %d; it must be >= 0 and a multiple of %d", r.field,
                        ref.offset(), kRegionAlignment));
  }
  RETURN_IF_ERROR(region.memory().StillWhole());
  const int64_t size = region.memory().size();
  if (ref.offset() > size || ref.byte_size() > size - ref.offset()) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "%s [%d, %d) is out of bounds of region '%s' (%s), which has %d bytes", r.field,
        ref.offset(), ref.offset() + ref.byte_size(), region.name(), region.description(), size));
  }
  return absl::OkStatus();
}

bool Overlap(const Ref& a, const Ref& b) {
  if (a.region != b.region) return false;
  const int64_t a0 = a.ref->offset(), a1 = a0 + a.ref->byte_size();
  const int64_t b0 = b.ref->offset(), b1 = b0 + b.ref->byte_size();
  return a0 < b1 && b0 < a1;
}

bool OnDevice(const Ref& r) { return r.region->memory().on_device(); }

char* AddressOf(const Ref& r) { return r.region->memory().data() + r.ref->offset(); }

}  // namespace

bool HasRegionRefs(const pb::AttendRequest& request) {
  return request.has_q_ref() || request.has_k_ref() || request.has_v_ref() ||
         request.has_out_ref() || request.has_lse_ref();
}

absl::Status ResolveRegionRefs(const pb::AttendRequest& request,
                               const std::array<int64_t, 3>& inline_bytes,
                               const RegionRegistry* registry, const RequestSpec& spec, Job* job,
                               RegionHolds* holds) {
  if (!HasRegionRefs(request)) return absl::OkStatus();
  if (registry == nullptr) {
    return absl::FailedPreconditionError(
        "the request references shared-memory regions (q_ref ... lse_ref) but this server runs "
        "without --allow_shared_memory; send the tensors inline");
  }
  const pb::TensorRef* input_refs[3] = {request.has_q_ref() ? &request.q_ref() : nullptr,
                                        request.has_k_ref() ? &request.k_ref() : nullptr,
                                        request.has_v_ref() ? &request.v_ref() : nullptr};
  const char* input_names[3] = {"q", "k", "v"};
  for (int i = 0; i < 3; ++i) {
    if (input_refs[i] != nullptr && inline_bytes[i] != 0) {
      return absl::InvalidArgumentError(absl::StrFormat(
          "%s and %s_ref are both set; send the tensor inline or by reference", input_names[i],
          input_names[i]));
    }
  }
  if (request.has_lse_ref() && !spec.problem.return_lse) {
    return absl::InvalidArgumentError("lse_ref is set but return_lse is false");
  }
  std::vector<Ref> refs = {
      {"q_ref", input_refs[0], spec.QBytes(), &holds->q, false},
      {"k_ref", input_refs[1], spec.KVBytes(), &holds->k, false},
      {"v_ref", input_refs[2], spec.KVBytes(), &holds->v, false},
      {"out_ref", request.has_out_ref() ? &request.out_ref() : nullptr, spec.QBytes(),
       &holds->out, true},
      {"lse_ref", request.has_lse_ref() ? &request.lse_ref() : nullptr, spec.LseBytes(),
       &holds->lse, true},
  };
  for (Ref& r : refs) {
    if (r.ref != nullptr) RETURN_IF_ERROR(CheckRef(r, *registry));
  }
  // One hold per region, however many of the request's tensors it has (a
  // region's use count is the requests using it).
  for (size_t i = 0; i < refs.size(); ++i) {
    for (size_t j = 0; j < i; ++j) {
      if (refs[i].region != nullptr && refs[j].region == refs[i].region &&
          refs[j].hold->get() != nullptr) {
        refs[i].hold->Reset();
        break;
      }
    }
  }
  // An output may not overlap an input (the kernel would read what it
  // writes) nor the other output.
  for (size_t o = 3; o < refs.size(); ++o) {
    if (refs[o].ref == nullptr) continue;
    for (size_t i = 0; i < o; ++i) {
      if (refs[i].ref == nullptr) continue;
      if (Overlap(refs[o], refs[i])) {
        return absl::InvalidArgumentError(absl::StrFormat(
            "%s [%d, %d) overlaps %s [%d, %d) in region '%s'; outputs need their own bytes",
            refs[o].field, refs[o].ref->offset(), refs[o].ref->offset() + refs[o].ref->byte_size(),
            refs[i].field, refs[i].ref->offset(), refs[i].ref->offset() + refs[i].ref->byte_size(),
            refs[o].region->name()));
      }
    }
  }
  TensorSource* inputs[3] = {&job->q, &job->k, &job->v};
  for (int i = 0; i < 3; ++i) {
    if (refs[i].ref == nullptr) continue;
    *inputs[i] = TensorSource::InRegion(
        absl::string_view(AddressOf(refs[i]), static_cast<size_t>(refs[i].needed)),
        OnDevice(refs[i]) ? SourceKind::kDeviceRegion : SourceKind::kSystemRegion);
  }
  TensorDestination* outputs[2] = {&job->out, &job->lse};
  for (int o = 0; o < 2; ++o) {
    const Ref& r = refs[3 + o];
    if (r.ref == nullptr) continue;
    *outputs[o] = TensorDestination::InRegion(
        OnDevice(r) ? DestinationKind::kDeviceRegion : DestinationKind::kSystemRegion,
        AddressOf(r));
  }
  return absl::OkStatus();
}

}  // namespace attn::server
