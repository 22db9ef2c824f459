// FwdParams: everything a FlashAttention-2 forward launch needs, as a plain
// struct passed by value (__grid_constant__); FA2's Flash_fwd_params, cut to
// the forward pass. Host and device code share it; it includes no CUDA header.
#ifndef ATTN_KERNELS_SRC_CUDA_FWD_PARAMS_H_
#define ATTN_KERNELS_SRC_CUDA_FWD_PARAMS_H_

#include <cstdint>

namespace attn::fa2 {

struct FwdParams {
  // [batch, seq, heads, head_dim] (varlen: [total, heads, head_dim]); the last
  // dimension contiguous, every pointer and row/head stride 16-byte aligned.
  const void* q;
  const void* k;
  const void* v;
  void* o;
  float* lse;                   // null: not wanted; else [batch, heads_q, seqlen_q]
                                // (varlen: [heads_q, total_q])
  const int32_t* cu_seqlens_q;  // null unless varlen: batch + 1 token offsets
  const int32_t* cu_seqlens_k;
  // Element strides; the batch strides are unused with varlen. K and V share
  // their row stride (as in any [.., seq, (2,) heads, dim] layout): a second
  // 64-bit stride live through the main loop costs the 128x64 tile spills.
  int64_t q_batch_stride, q_row_stride, q_head_stride;
  int64_t k_batch_stride, k_head_stride;
  int64_t v_batch_stride, v_head_stride;
  int64_t kv_row_stride;
  int64_t o_batch_stride, o_row_stride, o_head_stride;
  int batch;
  int seqlen_q;  // varlen: the longest sequence (sizes the grid)
  int seqlen_k;
  int heads_q;
  int heads_per_kv;  // heads_q / heads_kv (grouped-query attention)
  int total_q;       // varlen: packed query tokens (LSE layout)
  int total_k;       // varlen keys: packed key tokens (the hopper family's tensor maps)
  int window_left;   // −1: unbounded
  int window_right;  // −1: unbounded; causal is 0
  float scale;       // softmax scale applied to q·kᵀ
  float scale_log2;  // scale * log2(e), for the exp2 form of the softmax
  // Split-KV (kernels launched with kSplit): each CTA attends one of
  // num_splits ranges of key blocks and writes its normalised partial O and
  // LSE in float32 to o_accum [num_splits, lse_rows, head_dim] and
  // lse_accum [num_splits, lse_rows], rows indexed as the LSE is
  // ([batch, heads_q, seqlen_q], varlen [heads_q, total_q]); the combine
  // kernel (flash_combine_kernel.cuh) reduces them into o and lse.
  int num_splits;  // 1 without split-KV
  int64_t lse_rows;
  float* o_accum;
  float* lse_accum;
  // Host side, for the launch: the combine starts as a programmatic
  // dependent of the split kernel (device/ptx.cuh's GridDependencyWait), on
  // devices of compute capability 9.0 and later, where the launch attribute
  // exists.
  bool dependent_combine;
  // K/V cache (decode configurations only; attn/problem.h's kv_cache):
  // sequence b attends cache_seqlens[b] keys, plus its seqlen_q (varlen:
  // cu_seqlens_q's) new ones when k_new is set, at most seqlen_k (the
  // capacity). Dense caches step sequences by k/v_batch_stride; paged ones
  // (block_table set) find token t in row t & (page size - 1) of page
  // block_table[b * block_table_stride + (t >> page_shift)], pages
  // k/v_batch_stride apart; a page outside [0, num_pages) is never touched.
  const int32_t* cache_seqlens;  // null: no cache (seqlen_k / cu_seqlens_k)
  const int32_t* block_table;    // null: a dense cache
  int block_table_stride;
  int page_shift;
  int num_pages;
  // Append (the launch writes these rows into the cache first): [batch,
  // seqlen_q, heads_kv, head_dim] (varlen: packed as q); null: none.
  const void* k_new;
  const void* v_new;
  int64_t k_new_batch_stride, k_new_row_stride, k_new_head_stride;
  int64_t v_new_batch_stride, v_new_row_stride, v_new_head_stride;
};

}  // namespace attn::fa2

#endif  // ATTN_KERNELS_SRC_CUDA_FWD_PARAMS_H_
