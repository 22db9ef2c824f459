// server/frontend/session_service.h
//
// The KV-cache session RPCs of attnserve.v1.Attention (HoldSessions,
// OpenSession, AttendSessions, TruncateSession, ForkSession, CloseSession,
// ListSessions) over the runtime's SessionRegistry. AttentionService
// forwards to these. FAILED_PRECONDITION (saying why) on a server without
// sessions. A lease's owner is PeerOf the call that holds it.
//
// AttendSessions: raw bytes, as Attend (sliced_request_reader.h: q, k and v
// stay in the slices gRPC read them into; response_writer.h: o is sent from
// the memory the executor lent); BeginStep on the gRPC thread (checks,
// pages, the block table), one job through the scheduler like any Attend,
// EndStep when it is done (the new lengths committed, or the pages given
// back).
#ifndef ATTN_SERVER_FRONTEND_SESSION_SERVICE_H_
#define ATTN_SERVER_FRONTEND_SESSION_SERVICE_H_

#include "attnserve/v1/attention.grpc.pb.h"
#include "frontend/call_gate.h"
#include "runtime/runtime.h"

namespace attn::server {

grpc::ServerWriteReactor<attnserve::v1::HoldSessionsResponse>* HoldSessions(
    Runtime* runtime, grpc::CallbackServerContext* context);
grpc::ServerUnaryReactor* OpenSession(Runtime* runtime, grpc::CallbackServerContext* context,
                                      const attnserve::v1::OpenSessionRequest* request,
                                      attnserve::v1::OpenSessionResponse* response);
// `gate` has admitted the call; it is left when the call is done.
grpc::ServerUnaryReactor* AttendSessions(Runtime* runtime, CallGate* gate,
                                         grpc::CallbackServerContext* context,
                                         const grpc::ByteBuffer* request,
                                         grpc::ByteBuffer* response);
grpc::ServerUnaryReactor* TruncateSession(Runtime* runtime, grpc::CallbackServerContext* context,
                                          const attnserve::v1::TruncateSessionRequest* request,
                                          attnserve::v1::TruncateSessionResponse* response);
grpc::ServerUnaryReactor* ForkSession(Runtime* runtime, grpc::CallbackServerContext* context,
                                      const attnserve::v1::ForkSessionRequest* request,
                                      attnserve::v1::ForkSessionResponse* response);
grpc::ServerUnaryReactor* CloseSession(Runtime* runtime, grpc::CallbackServerContext* context,
                                       const attnserve::v1::CloseSessionRequest* request);
grpc::ServerUnaryReactor* ListSessions(Runtime* runtime, grpc::CallbackServerContext* context,
                                       const attnserve::v1::ListSessionsRequest* request,
                                       attnserve::v1::ListSessionsResponse* response);

}  // namespace attn::server

#endif  // ATTN_SERVER_FRONTEND_SESSION_SERVICE_H_
