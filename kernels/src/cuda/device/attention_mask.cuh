// Which keys a CTA's query rows may see (FA2's conventions, attn/problem.h):
// key j is visible to query row i when j < seqlen_k and, with a window,
//   i + diag - window_left <= j <= i + diag + window_right,  diag = seqlen_k - seqlen_q
// (causal is window_right = 0; −1 leaves a side unbounded). Block-level
// questions (which key blocks to visit, which need element masks) are
// answered once per block, uniformly across the CTA; only blocks that cross
// the ragged end or a window edge pay for the element-wise mask.
#ifndef ATTN_KERNELS_SRC_CUDA_DEVICE_ATTENTION_MASK_CUH_
#define ATTN_KERNELS_SRC_CUDA_DEVICE_ATTENTION_MASK_CUH_

#include <cmath>

namespace attn::fa2 {

// kPacked (GQA-packed tiles, kernel_config.h's GqaPackedRows): tile row g
// is query row g / heads_per_kv; otherwise tile rows are query rows.
template <int kBlockM, int kBlockN, bool kPacked = false>
struct BlockMask {
  int seqlen_k;
  int diag;          // seqlen_k - seqlen_q
  int window_left;   // −1: unbounded
  int window_right;  // −1: unbounded
  int heads_per_kv = 1;  // query heads per KV head (kPacked only)

  // The query row of tile row `row`.
  __device__ __forceinline__ int QueryOf(int row) const { return kPacked ? row / heads_per_kv : row; }

  // Key blocks [begin, end) holding a key visible to some row of query block
  // `m_block` (rows m_block*kBlockM ... +kBlockM-1); end <= begin when none.
  __device__ __forceinline__ void KeyBlocks(int m_block, int* begin, int* end) const {
    const int row_first = QueryOf(m_block * kBlockM);
    const int row_last = QueryOf(m_block * kBlockM + kBlockM - 1);
    int first_key = 0;
    int last_key = seqlen_k - 1;
    if (window_left >= 0) first_key = max(first_key, row_first + diag - window_left);
    if (window_right >= 0) last_key = min(last_key, row_last + diag + window_right);
    *begin = first_key / kBlockN;
    *end = last_key < first_key ? *begin : last_key / kBlockN + 1;
  }

  // Whether some key of block `n_block` is invisible to some row of query
  // block `m_block` (ragged end or a window edge crosses the block).
  template <bool kCheckEnd>
  __device__ __forceinline__ bool NeedsMask(int m_block, int n_block) const {
    const int row_first = QueryOf(m_block * kBlockM);
    const int row_last = QueryOf(m_block * kBlockM + kBlockM - 1);
    const int key_first = n_block * kBlockN;
    const int key_last = key_first + kBlockN - 1;
    bool partial = kCheckEnd && key_last >= seqlen_k;
    if (window_right >= 0) partial |= key_last > row_first + diag + window_right;
    if (window_left >= 0) partial |= key_first < row_last + diag - window_left;
    return partial;
  }

  // Sets the invisible scores of one warp's S fragments to −inf. `row0` is
  // the query row of the warp's first m16 tile, `key0` the block's first key.
  template <int kMTiles, int kNTiles>
  __device__ __forceinline__ void Apply(float (&s)[kMTiles][kNTiles][4], int row0, int key0,
                                        int lane) const {
    const int group = lane / 4;
    const int tig = lane % 4;
#pragma unroll
    for (int mt = 0; mt < kMTiles; ++mt) {
#pragma unroll
      for (int h = 0; h < 2; ++h) {
        const int row = QueryOf(row0 + 16 * mt + group + 8 * h);
        int lo = 0;
        int hi = seqlen_k - 1;
        if (window_left >= 0) lo = max(lo, row + diag - window_left);
        if (window_right >= 0) hi = min(hi, row + diag + window_right);
#pragma unroll
        for (int nt = 0; nt < kNTiles; ++nt) {
#pragma unroll
          for (int i = 0; i < 2; ++i) {
            const int key = key0 + 8 * nt + 2 * tig + i;
            if (key < lo || key > hi) s[mt][nt][2 * h + i] = -INFINITY;
          }
        }
      }
    }
  }
};

}  // namespace attn::fa2

#endif  // ATTN_KERNELS_SRC_CUDA_DEVICE_ATTENTION_MASK_CUH_
