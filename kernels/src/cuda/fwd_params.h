// FwdParams: everything a FlashAttention-2 forward launch needs, as a plain
// struct passed by value (__grid_constant__). Host and device code share it;
// it includes no CUDA header.
#ifndef ATTN_KERNELS_SRC_CUDA_FWD_PARAMS_H_
#define ATTN_KERNELS_SRC_CUDA_FWD_PARAMS_H_

#include <cstdint>

namespace attn::fa2 {

struct FwdParams {
  const void* q;  // [batch, seq_len, num_heads, head_dim], 16-byte aligned
  const void* k;
  const void* v;
  void* o;
  int64_t batch_stride;  // elements between consecutive batches (seq_len * row_stride)
  int64_t row_stride;    // elements between consecutive tokens (num_heads * head_dim)
  int64_t head_stride;   // elements between consecutive heads (head_dim)
  int batch;
  int seq_len;
  int num_heads;
  float scale;       // softmax scale applied to q·kᵀ
  float scale_log2;  // scale * log2(e), for the exp2 form of the softmax
};

}  // namespace attn::fa2

#endif  // ATTN_KERNELS_SRC_CUDA_FWD_PARAMS_H_
