// server/frontend/region_service.h
//
// The shared-memory RPCs of attnserve.v1.Attention (HoldRegions,
// RegisterRegion, UnregisterRegion, ListRegions) on gRPC's callback API,
// over the runtime's RegionRegistry. AttentionService forwards to these.
//
// Every one is refused FAILED_PRECONDITION without --allow_shared_memory and
// PERMISSION_DENIED for a caller that is not on the server's host
// (security/same_host.h). None blocks a gRPC thread on a request: an
// unregister that has to wait for requests still using its region finishes
// from the thread that ends the last of them.
#ifndef ATTN_SERVER_FRONTEND_REGION_SERVICE_H_
#define ATTN_SERVER_FRONTEND_REGION_SERVICE_H_

#include "attnserve/v1/attention.grpc.pb.h"
#include "runtime/runtime.h"

namespace attn::server {

grpc::ServerWriteReactor<attnserve::v1::HoldRegionsResponse>* HoldRegions(
    Runtime* runtime, grpc::CallbackServerContext* context);
grpc::ServerUnaryReactor* RegisterRegion(Runtime* runtime, grpc::CallbackServerContext* context,
                                         const attnserve::v1::RegisterRegionRequest* request,
                                         attnserve::v1::RegisterRegionResponse* response);
grpc::ServerUnaryReactor* UnregisterRegion(Runtime* runtime,
                                           grpc::CallbackServerContext* context,
                                           const attnserve::v1::UnregisterRegionRequest* request);
grpc::ServerUnaryReactor* ListRegions(Runtime* runtime, grpc::CallbackServerContext* context,
                                      const attnserve::v1::ListRegionsRequest* request,
                                      attnserve::v1::ListRegionsResponse* response);

}  // namespace attn::server

#endif  // ATTN_SERVER_FRONTEND_REGION_SERVICE_H_
