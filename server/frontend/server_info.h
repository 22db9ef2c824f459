// server/frontend/server_info.h
//
// The answers of GetServerInfo, ListKernels and GetStats, built from what
// the runtime, the kernel catalog and the counters hold: the wire's side of
// them, so nothing below the front end builds a proto.
#ifndef ATTN_SERVER_FRONTEND_SERVER_INFO_H_
#define ATTN_SERVER_FRONTEND_SERVER_INFO_H_

#include "attnserve/v1/attention.pb.h"
#include "backends/kernel_catalog.h"
#include "runtime/runtime.h"

namespace attn::server {

void FillServerInfo(const Runtime& runtime, attnserve::v1::ServerInfo* info);
void FillKernels(const KernelCatalog& catalog, attnserve::v1::ListKernelsResponse* response);
void FillStats(const Runtime& runtime, attnserve::v1::ServerStats* stats);

}  // namespace attn::server

#endif  // ATTN_SERVER_FRONTEND_SERVER_INFO_H_
