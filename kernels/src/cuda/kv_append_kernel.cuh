// The K/V cache append (flash_attn_with_kvcache's k / v arguments): writes
// each sequence's new key and value rows into its cache at positions
// cache_seqlens[b] ..., before the attention that reads them runs on the
// same stream. One thread per 16-byte chunk of (new token, KV head); rows
// past the capacity, or on a page outside [0, num_pages), are not written.
#ifndef ATTN_KERNELS_SRC_CUDA_KV_APPEND_KERNEL_CUH_
#define ATTN_KERNELS_SRC_CUDA_KV_APPEND_KERNEL_CUH_

#include <cstdint>

#include "device/smem_tile.cuh"  // kChunkElems
#include "fwd_params.h"

namespace attn::fa2 {

inline constexpr int kAppendThreads = 128;

// Grid (chunks of the longest sequence's new rows / kAppendThreads, batch).
template <int kHeadDim>
__global__ void __launch_bounds__(kAppendThreads)
    KvAppendKernel(const __grid_constant__ FwdParams p) {
  constexpr int kChunks = kHeadDim / kChunkElems;
  const int b = blockIdx.y;
  const int heads_kv = p.heads_q / p.heads_per_kv;
  const int64_t idx = static_cast<int64_t>(blockIdx.x) * kAppendThreads + threadIdx.x;
  const int chunk = static_cast<int>(idx % kChunks);
  const int head = static_cast<int>((idx / kChunks) % heads_kv);
  const int i = static_cast<int>(idx / (kChunks * heads_kv));  // new token of sequence b
  const bool packed = p.cu_seqlens_q != nullptr;
  const int row0 = packed ? p.cu_seqlens_q[b] : 0;
  const int rows = packed ? p.cu_seqlens_q[b + 1] - row0 : p.seqlen_q;
  if (i >= rows) return;
  const int pos = p.cache_seqlens[b] + i;
  if (pos < 0 || pos >= p.seqlen_k) return;
  int64_t k_at, v_at;  // the cache row's first element
  if (p.block_table != nullptr) {
    const int page = p.block_table[static_cast<int64_t>(b) * p.block_table_stride + (pos >> p.page_shift)];
    if (static_cast<unsigned>(page) >= static_cast<unsigned>(p.num_pages)) return;
    const int64_t row = pos & ((1 << p.page_shift) - 1);
    k_at = page * p.k_batch_stride + row * p.kv_row_stride;
    v_at = page * p.v_batch_stride + row * p.kv_row_stride;
  } else {
    k_at = b * p.k_batch_stride + static_cast<int64_t>(pos) * p.kv_row_stride;
    v_at = b * p.v_batch_stride + static_cast<int64_t>(pos) * p.kv_row_stride;
  }
  const int64_t column = static_cast<int64_t>(chunk) * kChunkElems;
  const int64_t k_src = (packed ? (row0 + i) * p.k_new_row_stride
                                : b * p.k_new_batch_stride + i * p.k_new_row_stride) +
                        head * p.k_new_head_stride + column;
  const int64_t v_src = (packed ? (row0 + i) * p.v_new_row_stride
                                : b * p.v_new_batch_stride + i * p.v_new_row_stride) +
                        head * p.v_new_head_stride + column;
  // 16-bit elements, moved as raw 16-byte chunks (the dtype does not matter).
  using Chunk = uint4;
  using Element = uint16_t;
  const Element* k_new = static_cast<const Element*>(p.k_new);
  const Element* v_new = static_cast<const Element*>(p.v_new);
  // The cache is written through FwdParams' k / v (attn/problem.h: with
  // append they point to writable memory).
  Element* k = const_cast<Element*>(static_cast<const Element*>(p.k));
  Element* v = const_cast<Element*>(static_cast<const Element*>(p.v));
  *reinterpret_cast<Chunk*>(k + k_at + head * p.k_head_stride + column) =
      *reinterpret_cast<const Chunk*>(k_new + k_src);
  *reinterpret_cast<Chunk*>(v + v_at + head * p.v_head_stride + column) =
      *reinterpret_cast<const Chunk*>(v_new + v_src);
}

}  // namespace attn::fa2

#endif  // ATTN_KERNELS_SRC_CUDA_KV_APPEND_KERNEL_CUH_
