// Keeps the tools' large buffers in the heap, reused from call to call.
//
// glibc serves every allocation above its mmap threshold (at most 32 MiB)
// with a fresh mmap and unmaps it on free, so each large tensor, request
// message and gRPC slice is first-touched page by page: measured on the
// 2-core Debian VM, copying, serializing or parsing a 96 MiB
// AttendSessionsRequest took ~245 ms each on fresh memory and 5-10 ms on
// reused memory. The tools (attn_cli, attn_loadgen) are clients whose
// time is the measurement, so they keep freed memory for reuse instead.
#ifndef ATTN_CLIENT_TOOLS_LARGE_ALLOCATIONS_H_
#define ATTN_CLIENT_TOOLS_LARGE_ALLOCATIONS_H_

namespace attn::tools {

// Call once at the start of main, before any thread starts: malloc stops
// using mmap and keeps freed memory (no trimming), so the process's
// footprint stays at its peak.
void KeepLargeAllocationsInTheHeap();

}  // namespace attn::tools

#endif  // ATTN_CLIENT_TOOLS_LARGE_ALLOCATIONS_H_
