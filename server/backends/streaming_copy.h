// server/backends/streaming_copy.h
//
// CopyWithStreamingStores: memcpy whose stores bypass the CPU caches
// (x86 non-temporal stores), for copies into memory the CPU will not read
// again: the pinned staging a request's tensors are copied into, which only
// the GPU's DMA reads afterwards.
//
// Why not memcpy: a cached store first reads the destination line into the
// cache (read-for-ownership) and then evicts something to make room, so
// memcpy moves about three bytes over the memory bus per byte copied where
// streaming stores move two; and the 48 MiB a B=1, S=4096 request stages
// would push gRPC's receive buffers out of the last-level cache. Under load
// the copies share the host's memory bandwidth with the transport, so the
// pass saved goes to it: on the H200 host, B=1, S=4096 requests were served
// 8-34 % faster (bench/RESULTS.md, 2026-12-02 third run). glibc's memcpy
// switches to streaming stores only for copies larger than a fraction of
// the shared cache, above the 1 MiB chunks the staging copy is split into.
//
// Where the CPU has no streaming stores (not x86-64), a plain memcpy.
// The bytes are visible to other threads and to DMA once this returns (the
// stores are fenced).
#ifndef ATTN_SERVER_STREAMING_COPY_H_
#define ATTN_SERVER_STREAMING_COPY_H_

#include <cstddef>

namespace attn::server {

void CopyWithStreamingStores(char* to, const char* from, size_t bytes);

}  // namespace attn::server

#endif  // ATTN_SERVER_STREAMING_COPY_H_
