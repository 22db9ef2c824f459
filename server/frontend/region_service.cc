#include "frontend/region_service.h"

#include <memory>
#include <mutex>
#include <string>
#include <utility>

#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "core/log.h"
#include "frontend/lease_reactor.h"
#include "regions/system_region.h"
#include "security/same_host.h"
#include "core/status_util.h"

namespace attn::server {
namespace {

namespace pb = ::attnserve::v1;

constexpr size_t kMaxRegionNameBytes = 64;

// OK when this caller may use regions at all.
absl::Status MayUseRegions(Runtime* runtime, const grpc::CallbackServerContext& context) {
  if (runtime->regions() == nullptr) {
    return absl::FailedPreconditionError(
        "shared-memory regions are off on this server; start attn_server with "
        "--allow_shared_memory (same-host clients only)");
  }
  if (!IsSameHostPeer(context.peer())) {
    return absl::PermissionDeniedError(absl::StrFormat(
        "shared-memory regions are for callers on the server's host (a unix socket or a "
        "loopback address); this call comes from %s",
        context.peer()));
  }
  return absl::OkStatus();
}

// UnregisterRegion: answers when no request uses the region any more, or
// when the call ends first (deadline, cancel).
class UnregisterReactor final : public grpc::ServerUnaryReactor {
 public:
  explicit UnregisterReactor(std::shared_ptr<Region> region)
      : state_(std::make_shared<State>()), region_name_(region->name()) {
    state_->reactor = this;
    std::shared_ptr<State> state = state_;
    region->WhenIdle([state]() { state->Finish(grpc::Status::OK); });
    // The region's memory goes with the last RegionUse, not with this call.
  }
  void OnCancel() override {
    state_->Finish(grpc::Status(
        grpc::StatusCode::DEADLINE_EXCEEDED,
        absl::StrFormat("region '%s' is unregistered, but requests still used it when this call "
                        "ended; the server unmaps it when they finish",
                        region_name_)));
  }
  void OnDone() override {
    {
      std::lock_guard<std::mutex> lock(state_->mu);
      state_->reactor = nullptr;
    }
    delete this;
  }

 private:
  // Shared with the region's idle callback, which may run after OnDone.
  struct State {
    std::mutex mu;
    UnregisterReactor* reactor = nullptr;
    bool finished = false;
    void Finish(const grpc::Status& status) {
      std::lock_guard<std::mutex> lock(mu);
      if (finished || reactor == nullptr) return;
      finished = true;
      reactor->ServerUnaryReactor::Finish(status);
    }
  };
  const std::shared_ptr<State> state_;
  const std::string region_name_;
};

absl::Status CheckName(const std::string& name) {
  if (name.empty() || name.size() > kMaxRegionNameBytes) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "name has %d bytes; a region name has 1 to %d", name.size(), kMaxRegionNameBytes));
  }
  return absl::OkStatus();
}

// The wire's description of `region`, with the requests using it now.
void ToProto(const Region& region, pb::RegionInfo* proto) {
  const RegionRegistration& info = region.info();
  proto->set_name(info.name);
  proto->set_region_id(info.region_id);
  switch (info.kind) {
    case RegionRegistration::Kind::kSystem: {
      pb::SystemRegion* system = proto->mutable_system();
      system->set_shm_name(info.shm_name);
      system->set_offset(info.offset);
      system->set_byte_size(info.byte_size);
      break;
    }
    case RegionRegistration::Kind::kCuda: {
      pb::CudaRegion* cuda = proto->mutable_cuda();
      cuda->set_ipc_handle(info.ipc_handle);
      cuda->set_device_ordinal(info.device);
      cuda->set_offset(info.offset);
      cuda->set_byte_size(info.byte_size);
      break;
    }
  }
  proto->set_requests_using(region.uses());
}

absl::StatusOr<std::shared_ptr<Region>> Register(Runtime* runtime,
                                                 const pb::RegisterRegionRequest& request) {
  RETURN_IF_ERROR(CheckName(request.name()));
  RegionRegistration info;
  info.name = request.name();
  std::string description;
  RegionBackend& backend = runtime->region_backend();
  RegionRegistry& registry = *runtime->regions();
  switch (request.kind_case()) {
    case pb::RegisterRegionRequest::kSystem: {
      const pb::SystemRegion& system = request.system();
      info.kind = RegionRegistration::Kind::kSystem;
      info.shm_name = system.shm_name();
      info.offset = system.offset();
      info.byte_size = system.byte_size();
      description = absl::StrFormat("system '%s' [%d, %d)", system.shm_name(), system.offset(),
                                    system.offset() + system.byte_size());
      return registry.Register(request.lease_id(), std::move(info), description, [&]() {
        return MapSystemRegion(system.shm_name(), system.offset(), system.byte_size(), backend);
      });
    }
    case pb::RegisterRegionRequest::kCuda: {
      const pb::CudaRegion& cuda = request.cuda();
      if (!backend.cuda_regions()) {
        return absl::FailedPreconditionError(absl::StrFormat(
            "cuda regions need the CUDA backend; this server runs the %s backend (use a system "
            "region)",
            runtime->backend_name()));
      }
      info.kind = RegionRegistration::Kind::kCuda;
      info.ipc_handle = cuda.ipc_handle();
      info.device = cuda.device_ordinal();
      info.offset = cuda.offset();
      info.byte_size = cuda.byte_size();
      description = absl::StrFormat("cuda:%d [%d, %d)", cuda.device_ordinal(), cuda.offset(),
                                    cuda.offset() + cuda.byte_size());
      return registry.Register(request.lease_id(), std::move(info), description, [&]() {
        return backend.OpenCudaRegion(cuda.ipc_handle(), cuda.device_ordinal(), cuda.offset(),
                                      cuda.byte_size());
      });
    }
    case pb::RegisterRegionRequest::KIND_NOT_SET:
      break;
  }
  return absl::InvalidArgumentError("neither system nor cuda is set; a region is one of them");
}

}  // namespace

grpc::ServerWriteReactor<pb::HoldRegionsResponse>* HoldRegions(
    Runtime* runtime, grpc::CallbackServerContext* context) {
  if (absl::Status ok = MayUseRegions(runtime, *context); !ok.ok()) {
    return new RefusedLease<pb::HoldRegionsResponse>(ok);
  }
  // The lease's regions end with the call.
  RegionRegistry* registry = runtime->regions();
  const std::string id = registry->OpenLease();
  return new LeaseReactor<pb::HoldRegionsResponse>(
      "region", id, context->peer(), [registry, id]() {
        return absl::StrCat(registry->EndLease(id).size(), " regions unregistered");
      });
}

grpc::ServerUnaryReactor* RegisterRegion(Runtime* runtime, grpc::CallbackServerContext* context,
                                         const pb::RegisterRegionRequest* request,
                                         pb::RegisterRegionResponse* response) {
  if (absl::Status ok = MayUseRegions(runtime, *context); !ok.ok()) {
    return Finished(context, ok);
  }
  absl::StatusOr<std::shared_ptr<Region>> region = Register(runtime, *request);
  if (!region.ok()) {
    LOGF(kInfo, "RegisterRegion '%s' refused: %s", absl::CHexEscape(request->name().substr(0, 64)),
         region.status().ToString());
    return Finished(context, region.status());
  }
  LOGF(kInfo, "region '%s' registered: %s", (*region)->name(), (*region)->description());
  ToProto(**region, response->mutable_region());
  return Finished(context, absl::OkStatus());
}

grpc::ServerUnaryReactor* UnregisterRegion(Runtime* runtime,
                                           grpc::CallbackServerContext* context,
                                           const pb::UnregisterRegionRequest* request) {
  if (absl::Status ok = MayUseRegions(runtime, *context); !ok.ok()) {
    return Finished(context, ok);
  }
  absl::StatusOr<std::shared_ptr<Region>> region =
      runtime->regions()->Unregister(request->lease_id(), request->name());
  if (!region.ok()) return Finished(context, region.status());
  LOGF(kInfo, "region '%s' unregistered (%d requests still use it)", (*region)->name(),
       (*region)->uses());
  return new UnregisterReactor(*std::move(region));
}

grpc::ServerUnaryReactor* ListRegions(Runtime* runtime, grpc::CallbackServerContext* context,
                                      const pb::ListRegionsRequest* request,
                                      pb::ListRegionsResponse* response) {
  if (absl::Status ok = MayUseRegions(runtime, *context); !ok.ok()) {
    return Finished(context, ok);
  }
  auto regions = runtime->regions()->List(request->lease_id());
  if (!regions.ok()) return Finished(context, regions.status());
  for (const auto& region : *regions) {
    ToProto(*region, response->add_regions());
  }
  return Finished(context, absl::OkStatus());
}

}  // namespace attn::server
