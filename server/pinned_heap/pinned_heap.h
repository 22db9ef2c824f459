/* server/pinned_heap/pinned_heap.h
 *
 * libattn_pinned_heap.so: an opt-in malloc shim for attn_server on GPU
 * hosts, loaded with LD_PRELOAD. It serves every allocation of at least
 * ATTN_PINNED_HEAP_MIN_ALLOC bytes (default 64 KiB, the size of gRPC's
 * socket-read slices) from one arena of
 * ATTN_PINNED_HEAP_BYTES (default 4 GiB, reserved at the first such
 * allocation and never unmapped), and forwards the rest, and anything the
 * arena has no room for, to glibc. The CUDA backend page-locks the whole
 * arena once at start-up (cudaHostRegister), so the buffers gRPC reads
 * requests into are DMA sources: tensors go from them straight to the GPU,
 * with no staging copy.
 *
 *   LD_PRELOAD=/path/to/libattn_pinned_heap.so attn_server --backend=cuda ...
 *
 * Why a shim: gRPC C++ 1.51 reads sockets into slices it mallocs itself and
 * offers no allocator hook, so every inline tensor is copied once more into
 * pinned staging; on the H200 host that copy and its traffic are what
 * separate attnserve from the transport ceiling at S=4096 (issue 11).
 * Status (bench/RESULTS.md, 2026-12-02 fourth run): correct on the H200
 * (e2e, regions, attn_cli --check), but measured only with a 256 KiB
 * threshold, which no read slice reached, so nothing went by the new path;
 * the gain with the 64 KiB default is not measured yet. Opt-in until it is.
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

/* The arena: sets *base and *bytes and returns 1, reserving it if no large
 * allocation has yet; 0 when it cannot be reserved (mmap failed). Found by
 * attn_server with dlsym, so only a process that loaded the shim has it. */
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
