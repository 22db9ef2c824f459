// server/frontend/attention_service.h
//
// AttentionService: the attnserve.v1.Attention front end on gRPC's callback
// API. Handlers decode and validate on the gRPC thread (cheap: no tensor
// data is touched), hand a Job to the scheduler and return at once; the
// job's completion, on a worker thread, fills the response and finishes the
// call. No handler or reaction ever blocks.
//
// Until Attach() the service answers UNAVAILABLE ("starting"), so the server
// can listen (health NOT_SERVING) while the backend is still being set up;
// once calls() is closed it answers UNAVAILABLE ("draining").
#ifndef ATTN_SERVER_ATTENTION_SERVICE_H_
#define ATTN_SERVER_ATTENTION_SERVICE_H_

#include <atomic>

#include "attnserve/v1/attention.grpc.pb.h"
#include "frontend/call_gate.h"
#include "runtime/runtime.h"

namespace attn::server {

// Attend and AttendSessions are registered raw (bytes in and out) so the
// service parses the request itself, leaving the tensors in the slices gRPC
// read them into, answers a body that does not parse INVALID_ARGUMENT, and
// sends the output from the memory the executor lent (response_writer.h).
class AttentionService final
    : public attnserve::v1::Attention::WithRawCallbackMethod_Attend<
          attnserve::v1::Attention::WithRawCallbackMethod_AttendSessions<
              attnserve::v1::Attention::CallbackService>> {
 public:
  // `runtime` must outlive every call; the server attaches it once, after
  // start-up, and destroys it only after gRPC has shut down.
  void Attach(Runtime* runtime) { runtime_.store(runtime, std::memory_order_release); }

  // The Attend/AttendStream calls in progress; closed when the server drains.
  CallGate& calls() { return calls_; }

  grpc::ServerUnaryReactor* Attend(grpc::CallbackServerContext* context,
                                   const grpc::ByteBuffer* request,
                                   grpc::ByteBuffer* response) override;
  grpc::ServerBidiReactor<attnserve::v1::AttendStreamRequest, attnserve::v1::AttendStreamResponse>*
  AttendStream(grpc::CallbackServerContext* context) override;
  grpc::ServerUnaryReactor* ListKernels(grpc::CallbackServerContext* context,
                                        const attnserve::v1::ListKernelsRequest* request,
                                        attnserve::v1::ListKernelsResponse* response) override;
  grpc::ServerUnaryReactor* GetServerInfo(grpc::CallbackServerContext* context,
                                          const attnserve::v1::GetServerInfoRequest* request,
                                          attnserve::v1::ServerInfo* response) override;
  grpc::ServerUnaryReactor* GetStats(grpc::CallbackServerContext* context,
                                     const attnserve::v1::GetStatsRequest* request,
                                     attnserve::v1::ServerStats* response) override;
  // Shared-memory regions (frontend/region_service.h).
  grpc::ServerWriteReactor<attnserve::v1::HoldRegionsResponse>* HoldRegions(
      grpc::CallbackServerContext* context,
      const attnserve::v1::HoldRegionsRequest* request) override;
  grpc::ServerUnaryReactor* RegisterRegion(grpc::CallbackServerContext* context,
                                           const attnserve::v1::RegisterRegionRequest* request,
                                           attnserve::v1::RegisterRegionResponse* response) override;
  grpc::ServerUnaryReactor* UnregisterRegion(
      grpc::CallbackServerContext* context, const attnserve::v1::UnregisterRegionRequest* request,
      attnserve::v1::UnregisterRegionResponse* response) override;
  grpc::ServerUnaryReactor* ListRegions(grpc::CallbackServerContext* context,
                                        const attnserve::v1::ListRegionsRequest* request,
                                        attnserve::v1::ListRegionsResponse* response) override;
  // KV-cache sessions (frontend/session_service.h).
  grpc::ServerWriteReactor<attnserve::v1::HoldSessionsResponse>* HoldSessions(
      grpc::CallbackServerContext* context,
      const attnserve::v1::HoldSessionsRequest* request) override;
  grpc::ServerUnaryReactor* OpenSession(grpc::CallbackServerContext* context,
                                        const attnserve::v1::OpenSessionRequest* request,
                                        attnserve::v1::OpenSessionResponse* response) override;
  grpc::ServerUnaryReactor* AttendSessions(grpc::CallbackServerContext* context,
                                           const grpc::ByteBuffer* request,
                                           grpc::ByteBuffer* response) override;
  grpc::ServerUnaryReactor* TruncateSession(
      grpc::CallbackServerContext* context, const attnserve::v1::TruncateSessionRequest* request,
      attnserve::v1::TruncateSessionResponse* response) override;
  grpc::ServerUnaryReactor* ForkSession(grpc::CallbackServerContext* context,
                                        const attnserve::v1::ForkSessionRequest* request,
                                        attnserve::v1::ForkSessionResponse* response) override;
  grpc::ServerUnaryReactor* CloseSession(grpc::CallbackServerContext* context,
                                         const attnserve::v1::CloseSessionRequest* request,
                                         attnserve::v1::CloseSessionResponse* response) override;
  grpc::ServerUnaryReactor* ListSessions(grpc::CallbackServerContext* context,
                                         const attnserve::v1::ListSessionsRequest* request,
                                         attnserve::v1::ListSessionsResponse* response) override;

 private:
  Runtime* runtime() const { return runtime_.load(std::memory_order_acquire); }

  std::atomic<Runtime*> runtime_{nullptr};
  CallGate calls_;
};

}  // namespace attn::server

#endif  // ATTN_SERVER_ATTENTION_SERVICE_H_
