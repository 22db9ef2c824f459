/* attn/c_api.h
 *
 * C ABI of the attention kernel library (shared library libattn_c.so), for
 * callers outside C++: the benchmark script drives it through Python ctypes
 * on PyTorch tensors, in the same process as PyTorch's own attention.
 *
 * Tensors are contiguous [batch, seq_len, num_heads, head_dim] arrays of
 * 16-bit elements (attn_forward_ex: see there). GPU kernels take device pointers and run asynchronously
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

#include "attn/c_dtype.h" /* ATTN_DTYPE_FLOAT16, ATTN_DTYPE_BFLOAT16 */

#ifdef __cplusplus
extern "C" {
#endif

/* out = softmax(q·kᵀ·softmax_scale)·v with kernel `kernel` (a name from
 * attn_list_kernels); softmax_scale 0 means 1/sqrt(head_dim). */
int attn_forward(const char* kernel, int dtype, const void* q, const void* k, const void* v,
                 void* out, int64_t batch, int64_t seq_len, int64_t num_heads,
                 int64_t head_dim, float softmax_scale, void* stream, char* error,
                 size_t error_size);

/* The full problem of FlashAttention-2's flash_attn_func and
 * flash_attn_varlen_func (attn/problem.h), on contiguous tensors:
 *   q, out  [batch, seqlen_q, heads_q, head_dim]
 *   k, v    [batch, seqlen_k, heads_kv, head_dim]
 * or, with varlen (cu_seqlens_q and cu_seqlens_k not NULL), packed
 *   q, out  [total_q, heads_q, head_dim],  k, v  [total_k, heads_kv, head_dim]
 * where sequence b owns tokens cu_seqlens[b] .. cu_seqlens[b+1]-1 (batch + 1
 * int32 offsets each, on the device for GPU kernels; seqlen_q / seqlen_k are
 * then the longest lengths, and total_q / total_k are ignored without varlen).
 *   heads_q a multiple of heads_kv (GQA; heads_kv = 1 is MQA);
 *   causal != 0: mask aligned to the bottom right (key j visible to query i
 *     iff j <= i + seqlen_k - seqlen_q);
 *   window_left / window_right: sliding window around that diagonal, -1 for
 *     unbounded (both -1: no window);
 *   softmax_scale 0 means 1/sqrt(head_dim);
 *   lse: NULL, or float32 [batch, heads_q, seqlen_q] (varlen [heads_q,
 *     total_q]) receiving log(sum_j exp(scale * q·k_j)) per query row.
 * A query row that sees no key gets output 0 and LSE -inf. Which kernels
 * take which features: attn_kernel_caps. */
int attn_forward_ex(const char* kernel, int dtype, const void* q, const void* k, const void* v,
                    void* out, float* lse, const int32_t* cu_seqlens_q,
                    const int32_t* cu_seqlens_k, int64_t batch, int64_t seqlen_q,
                    int64_t seqlen_k, int64_t heads_q, int64_t heads_kv, int64_t head_dim,
                    int causal, int64_t window_left, int64_t window_right,
                    float softmax_scale, int64_t total_q, int64_t total_k, void* stream,
                    char* error, size_t error_size);

/* attn_forward_ex with split-KV's controls (attn/problem.h's AttentionArgs):
 *   workspace: NULL, or device scratch of workspace_bytes (16-byte aligned)
 *     the kernel may use for split-KV partial results when the query rows
 *     are few (decode); without it (or with too little) the kernel does not
 *     split;
 *   num_splits: 0 the kernel's choice (from the problem and the device,
 *     within the workspace), 1 none, n exactly n (fewer when there are fewer
 *     key blocks; at most 128), which needs
 *     n * (query tokens) * heads_q * (head_dim + 1) * 4 bytes of workspace.
 * attn_forward_ex is this with num_splits 0 and no workspace. */
int attn_forward_split(const char* kernel, int dtype, const void* q, const void* k,
                       const void* v, void* out, float* lse, const int32_t* cu_seqlens_q,
                       const int32_t* cu_seqlens_k, int64_t batch, int64_t seqlen_q,
                       int64_t seqlen_k, int64_t heads_q, int64_t heads_kv, int64_t head_dim,
                       int causal, int64_t window_left, int64_t window_right,
                       float softmax_scale, int64_t total_q, int64_t total_k, int num_splits,
                       void* workspace, int64_t workspace_bytes, void* stream, char* error,
                       size_t error_size);

/* A K/V cache (FlashAttention-2's flash_attn_with_kvcache; attn/problem.h's
 * kv_cache), for attn_forward_kvcache. Device pointers for GPU kernels,
 * host pointers for the CPU reference. */
typedef struct {
  /* The cache, written by an append: dense [batch, capacity, heads_kv,
   * head_dim], or paged pools [num_pages, page_size, heads_kv, head_dim]. */
  void* k_cache;
  void* v_cache;
  const int32_t* cache_seqlens; /* [batch]: tokens each sequence has cached */
  const int32_t* block_table;   /* NULL: dense; else [batch, max_pages_per_seq] page indices */
  int64_t capacity;             /* dense: tokens per sequence; paged: ignored */
  int64_t page_size;            /* paged: tokens per page, a power of two; else 0 */
  int64_t num_pages;            /* paged: pages in each pool */
  int64_t max_pages_per_seq;    /* paged: columns of block_table */
  /* NULL, or the new tokens' keys and values, [batch, seqlen_q, heads_kv,
   * head_dim] (varlen: [total_q, heads_kv, head_dim]): written into the cache
   * at cache_seqlens[b] before the attention, which then sees them too. */
  const void* k_new;
  const void* v_new;
  /* Optional host copies of the device tables (GPU kernels): when given,
   * they are checked first (lengths within the capacity, pages in range),
   * and a bad entry is refused with 3 naming it. Without them a bad entry
   * is never read or written outside the cache, but its result is
   * unspecified. cu_seqlens_q_host is needed only with varlen and k_new. */
  const int32_t* cache_seqlens_host;
  const int32_t* block_table_host;
  const int32_t* cu_seqlens_q_host;
} attn_kv_cache_t;

/* Attention of q [batch, seqlen_q, heads_q, head_dim] (varlen with
 * cu_seqlens_q: [total_q, heads_q, head_dim]) over a K/V cache: sequence b
 * sees its cache_seqlens[b] cached tokens and, with k_new, its seqlen_q new
 * ones (causal: aligned to the bottom right, so new token i sees the cache
 * and new tokens 0..i). The other arguments are attn_forward_split's; lse
 * and out as q's layout there. */
int attn_forward_kvcache(const char* kernel, int dtype, const void* q, void* out, float* lse,
                         const int32_t* cu_seqlens_q, const attn_kv_cache_t* cache,
                         int64_t batch, int64_t seqlen_q, int64_t heads_q, int64_t heads_kv,
                         int64_t head_dim, int causal, int64_t window_left,
                         int64_t window_right, float softmax_scale, int64_t total_q,
                         int num_splits, void* workspace, int64_t workspace_bytes, void* stream,
                         char* error, size_t error_size);

/* Bytes of workspace kernel `kernel` runs the attn_forward_kvcache problem
 * fastest with on the calling thread's current device (its own choice of
 * split-KV splits); 0 when none, or -1 with `error` for an unknown kernel. */
int64_t attn_kvcache_workspace_bytes(const char* kernel, const attn_kv_cache_t* cache,
                                     int64_t batch, int64_t seqlen_q, int64_t heads_q,
                                     int64_t heads_kv, int64_t head_dim, int64_t total_q,
                                     int varlen, char* error, size_t error_size);

/* What a kernel accepts (attn::KernelCapabilities). Flags are 0 or 1. */
typedef struct {
  int backend;                /* 0 CPU, 1 CUDA */
  int ladder_step;            /* 1..16 on the FA2 ladder; 0 for the CPU reference and flash_fwd */
  int num_head_dims;          /* entries of head_dims; 0: any head_dim up to max_head_dim */
  int head_dims[16];
  int max_head_dim;
  int seq_multiple;           /* seqlen_q and seqlen_k must be multiples of this */
  int causal;
  int window;
  int gqa;                    /* heads_kv < heads_q */
  int seqlen_q_ne_k;          /* seqlen_q != seqlen_k */
  int lse;
  int varlen;
  int strided;                /* non-contiguous strides (C++ API only) */
  int min_compute_capability; /* e.g. 80; 0 for the CPU */
} attn_kernel_caps_t;

/* Fills `caps` for kernel `kernel`; 0, or 5 (NOT_FOUND) for an unknown name,
 * 3 for NULL arguments. */
int attn_kernel_caps(const char* kernel, attn_kernel_caps_t* caps);

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
