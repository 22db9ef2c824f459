/* server/pinned_heap/pinned_heap.h
 *
 * The pinned heap: attn_server's malloc, linked into the executable (as one
 * links tcmalloc statically) with its malloc family exported
 * (exports.map), so it serves every allocation of the process, the shared
 * libraries' included. Dormant until armed: everything goes to
 * glibc. attn_pinned_heap_arm() (the server's --pinned_heap_bytes; by
 * default on the CUDA backend, sized to the admitted-bytes budget) reserves
 * one arena; from then on every allocation of at least 64 KiB (the size of
 * gRPC's socket-read slices) comes from it, and the rest, and anything the
 * arena has no room for, from glibc. The CUDA backend page-locks the arena
 * once at start-up (cudaHostRegister), so the buffers gRPC reads requests
 * into are DMA sources: tensors go from them straight to the GPU, with no
 * staging copy.
 *
 * Why a shim: gRPC C++ 1.51 reads sockets into slices it mallocs itself and
 * offers no allocator hook, so every inline tensor is copied once more into
 * pinned staging; on the H200 host that copy and its traffic are what
 * separated attnserve from the transport ceiling at S=4096 (issue 11).
 * Measured (bench/RESULTS.md, 2026-12-02 fifth run, call P): 299 and 258
 * requests/s at B=1, S=4096, concurrency 32, against 219 staged.
 *
 * Interposes malloc, free, realloc, reallocarray and malloc_usable_size;
 * calloc and the aligned allocators stay glibc's (free tells the two kinds
 * apart by address). Not for sanitizer builds, which interpose malloc too.
 */
#ifndef ATTN_SERVER_PINNED_HEAP_H_
#define ATTN_SERVER_PINNED_HEAP_H_

#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Reserves an arena of `bytes` (rounded up to 2 MiB) and serves large
 * allocations from it from now on; returns 1, or 0 when `bytes` is 0 or the
 * arena cannot be reserved (mmap failed). Once armed, it stays so: a later
 * call changes nothing and returns 1. */
int attn_pinned_heap_arm(size_t bytes);

/* The arena: sets *base and *bytes and returns 1 once armed, else 0. */
int attn_pinned_heap_arena(void** base, size_t* bytes);

/* What the arena holds now: allocated bytes (headers and rounding
 * included), and large allocations sent to glibc since the start because
 * the arena had no room. */
size_t attn_pinned_heap_used_bytes(void);
size_t attn_pinned_heap_overflows(void);

#ifdef __cplusplus
}
#endif

#endif /* ATTN_SERVER_PINNED_HEAP_H_ */
