/* attn/c_api.h
 *
 * C ABI of the attention kernel library (shared library libattn_c.so), for
 * callers outside C++: the benchmark script drives it through Python ctypes
 * on PyTorch tensors, in the same process as PyTorch's own attention.
 *
 * Tensors are contiguous [batch, seq_len, num_heads, head_dim] arrays of
 * 16-bit elements. GPU kernels take device pointers and run asynchronously
 * on `stream` (a cudaStream_t; NULL is the legacy default stream); the CPU
 * reference takes host pointers and runs synchronously.
 *
 * Every function returning int returns 0 on success or a gRPC/absl status
 * code (3 INVALID_ARGUMENT, 5 NOT_FOUND, 9 FAILED_PRECONDITION, 13 INTERNAL,
 * ...) and, if `error` is not NULL, writes a NUL-terminated message of at
 * most `error_size` bytes there. Thread-safe.
 */
#ifndef ATTN_C_API_H_
#define ATTN_C_API_H_

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

enum { ATTN_DTYPE_FLOAT16 = 0, ATTN_DTYPE_BFLOAT16 = 1 };

/* out = softmax(q·kᵀ·softmax_scale)·v with kernel `kernel` (a name from
 * attn_list_kernels); softmax_scale 0 means 1/sqrt(head_dim). */
int attn_forward(const char* kernel, int dtype, const void* q, const void* k, const void* v,
                 void* out, int64_t batch, int64_t seq_len, int64_t num_heads,
                 int64_t head_dim, float softmax_scale, void* stream, char* error,
                 size_t error_size);

/* Writes the kernel names, one per line ("\n"-separated, NUL-terminated),
 * into `buffer` if it holds `size` bytes; returns the bytes needed including
 * the NUL. The ladder comes in step order; with include_candidates != 0 the
 * step-7 tuning candidates follow. */
size_t attn_list_kernels(int include_candidates, char* buffer, size_t size);

/* The ladder step of kernel `kernel` (0 for the CPU reference), or -1. */
int attn_kernel_step(const char* kernel);

#ifdef __cplusplus
}  /* extern "C" */
#endif

#endif /* ATTN_C_API_H_ */
