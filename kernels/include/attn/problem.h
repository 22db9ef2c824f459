// attn/problem.h
//
// One attention call, in FlashAttention-2's conventions (flash_attn_func and
// flash_attn_varlen_func), and the memory it reads and writes.
//
//   out[b, i, h, :] = softmax_j(q[b, i, h, :] · k[b, j, h / G, :] * scale) · v[b, j, h / G, :]
//
// with G = heads_q / heads_kv (grouped-query attention; heads_kv = 1 is
// multi-query attention), over the keys j that query i may see:
//   * j < seqlen_k (each sequence's own lengths with varlen);
//   * causal: j <= i + seqlen_k - seqlen_q (aligned to the bottom right when
//     the lengths differ, as FA2 >= 2.1);
//   * sliding window (window_left, window_right >= 0):
//     i + seqlen_k - seqlen_q - window_left <= j <= i + seqlen_k - seqlen_q + window_right;
//     -1 leaves that side unbounded. causal is window_right = 0.
// A query row that sees no key gets output 0 and LSE −inf.
//
// Layout: [batch, seq, heads, head_dim] with per-tensor strides (elements)
// between batches, tokens and heads; the last dimension is contiguous. With
// varlen the tokens of all sequences are packed, [total, heads, head_dim]:
// sequence b owns tokens cu_seqlens[b] .. cu_seqlens[b+1]-1 (int32 offsets,
// batch + 1 of them, starting at 0 and non-decreasing, the last equal to the
// total), and the batch stride is not used.
//
// LSE (when return_lse): float32 log(sum_j exp(q·k_j * scale)) per query row,
// [batch, heads_q, seqlen_q] contiguous; with varlen [heads_q, total_q].
//
// K/V cache (kv_cache; FlashAttention-2's flash_attn_with_kvcache): K and V
// are a cache, and sequence b's keys are its first cache_seqlens[b] tokens
// there (AttentionArgs::cache_seqlens, int32 [batch]) — plus, with append,
// its new tokens, which the call first writes into the cache at positions
// cache_seqlens[b] ... (AttentionArgs::k_new / v_new: as many tokens as the
// sequence has queries). seqlen_k is then the cache's capacity per sequence;
// varlen packs the queries (and new tokens) only, and cu_seqlens_k and
// total_k are not used. The cache is either
//   * dense: [batch, seqlen_k, heads_kv, head_dim] (strides as any K), or
//   * paged (page_size > 0): pools [num_pages, page_size, heads_kv, head_dim]
//     (the strides' `batch` is the page stride) and a block table, int32
//     [batch, max_pages_per_seq]: token t of sequence b is row t % page_size
//     of page block_table[b * max_pages_per_seq + t / page_size]; seqlen_k is
//     max_pages_per_seq * page_size. Pages may be shared between sequences
//     (read-only: an append must not write a shared page).
#ifndef ATTN_PROBLEM_H_
#define ATTN_PROBLEM_H_

#include <cstdint>
#include <string>

#include "attn/dtype.h"

namespace attn {

struct AttentionProblem {
  int64_t batch = 0;     // sequences
  int64_t seqlen_q = 0;  // query tokens per sequence; varlen: the longest
  int64_t seqlen_k = 0;  // key/value tokens per sequence; varlen: the longest
  int64_t heads_q = 0;
  int64_t heads_kv = 0;  // divides heads_q
  int64_t head_dim = 0;
  bool causal = false;
  int64_t window_left = -1;   // -1: unbounded
  int64_t window_right = -1;  // -1: unbounded (causal forces 0)
  float softmax_scale = 0.0f;  // 0: 1/sqrt(head_dim)
  bool return_lse = false;
  // Packed sequences: total_q / total_k tokens, split by cu_seqlens.
  bool varlen = false;
  int64_t total_q = 0;  // varlen only
  int64_t total_k = 0;  // varlen only
  // K/V cache (see above).
  bool kv_cache = false;
  bool append = false;            // kv_cache only: write k_new / v_new first
  int64_t page_size = 0;          // 0: a dense cache; else tokens per page, a power of two
  int64_t num_pages = 0;          // paged only: pages in each pool
  int64_t max_pages_per_seq = 0;  // paged only: columns of the block table

  // Non-causal self-attention over [batch, seq_len, heads, head_dim] (the
  // seed's problem, and what a request without the newer fields means).
  static AttentionProblem SelfAttention(int64_t batch, int64_t seq_len, int64_t heads,
                                        int64_t head_dim);

  float ResolvedScale() const;
  // The window with causal folded in (right side 0); -1 = unbounded.
  int64_t EffectiveWindowRight() const { return causal ? 0 : window_right; }
  bool HasMask() const { return causal || window_left >= 0 || window_right >= 0; }
  bool IsSelfAttentionShape() const {
    return seqlen_q == seqlen_k && heads_q == heads_kv && !varlen && !kv_cache;
  }
  bool Paged() const { return kv_cache && page_size > 0; }
  // Whether K/V tokens are packed by cu_seqlens_k (varlen without a cache).
  bool VarlenKeys() const { return varlen && !kv_cache; }

  // Tokens of Q/O (and of k_new / v_new) and of K/V in memory (batch *
  // seqlen, or the varlen totals; a paged cache's pools).
  int64_t QTokens() const { return varlen ? total_q : batch * seqlen_q; }
  int64_t KVTokens() const {
    if (Paged()) return num_pages * page_size;
    return VarlenKeys() ? total_k : batch * seqlen_k;
  }
  int64_t QElements() const { return QTokens() * heads_q * head_dim; }   // Q and O
  int64_t KVElements() const { return KVTokens() * heads_kv * head_dim; }  // K and V
  int64_t LseElements() const { return return_lse ? QTokens() * heads_q : 0; }
  // Bytes of Q, of K (= V), of O (= Q), and of the LSE (float32).
  int64_t QBytes(DType dtype) const { return QElements() * DTypeSize(dtype); }
  int64_t KVBytes(DType dtype) const { return KVElements() * DTypeSize(dtype); }
  int64_t LseBytes() const { return LseElements() * 4; }

  // Number of query rows × visible keys summed over the problem: the work of
  // the call. Exact for masks and ragged lengths; for varlen it needs the
  // host copies of the offsets (batch + 1 each), else it assumes every
  // sequence has the longest lengths (a K/V cache: full to capacity).
  double VisiblePairs(const int32_t* cu_seqlens_q_host = nullptr,
                      const int32_t* cu_seqlens_k_host = nullptr) const;
  // 4 · head_dim · heads_q · VisiblePairs: two GEMMs, a multiply-add each.
  double Flops(const int32_t* cu_seqlens_q_host = nullptr,
               const int32_t* cu_seqlens_k_host = nullptr) const;

  // "[B=2, Sq=1000, Sk=1000, Hq=32, Hkv=8, D=128, causal]" for messages.
  std::string ToString() const;
};

// Element strides of one [batch, seq, heads, head_dim] tensor.
struct TensorStrides {
  int64_t batch = 0;  // ignored with varlen
  int64_t row = 0;    // between consecutive tokens
  int64_t head = 0;   // between consecutive heads
  bool operator==(const TensorStrides& o) const {
    return batch == o.batch && row == o.row && head == o.head;
  }
};

// The most key ranges one row's keys are split into (split-KV).
inline constexpr int kMaxSplits = 128;

// Workspace bytes split-KV with `num_splits` splits uses for `problem`: a
// float32 partial O and LSE per split and query row; 0 for one split.
int64_t SplitKvWorkspaceBytes(const AttentionProblem& problem, int num_splits);

// Dense strides of a tensor of `heads` heads: [batch, seq_len, heads, head_dim].
TensorStrides ContiguousStrides(int64_t seq_len, int64_t heads, int64_t head_dim);

// The largest page a paged K/V cache may have (tokens).
inline constexpr int64_t kMaxPageSize = int64_t{1} << 16;

// A call's memory. Host pointers for the CPU kernel, device pointers for GPU
// kernels (cu_seqlens too). q, k, v, out share `dtype`; lse is float32.
struct AttentionArgs {
  AttentionProblem problem;
  DType dtype = DType::kBFloat16;
  const void* q = nullptr;
  const void* k = nullptr;
  const void* v = nullptr;
  void* out = nullptr;
  float* lse = nullptr;                   // required iff problem.return_lse
  const int32_t* cu_seqlens_q = nullptr;  // required iff problem.varlen
  const int32_t* cu_seqlens_k = nullptr;
  TensorStrides q_strides, k_strides, v_strides, out_strides;
  // Device scratch memory the kernel may use during the call (16-byte
  // aligned, `workspace_bytes` long): split-KV partial results. Optional:
  // KernelHandle::WorkspaceBytes(problem) says how much the kernel's own
  // choice of splits uses; given less, it splits only as far as the
  // workspace holds (no split when it holds fewer than two).
  void* workspace = nullptr;
  int64_t workspace_bytes = 0;
  // K/V cache (problem.kv_cache; device memory for GPU kernels):
  // cache_seqlens [batch] tokens each sequence has cached before the call;
  // block_table [batch, max_pages_per_seq] when paged. With append, k_new
  // and v_new [batch, seqlen_q, heads_kv, head_dim] (varlen: [total_q,
  // heads_kv, head_dim], split as q) are written into the cache, so k and v
  // must then point to writable memory.
  const int32_t* cache_seqlens = nullptr;
  const int32_t* block_table = nullptr;
  const void* k_new = nullptr;
  const void* v_new = nullptr;
  TensorStrides k_new_strides, v_new_strides;
  // Split-KV for problems of few query rows: 0 = the kernel's choice (from
  // the problem and the device, as far as the workspace given holds), 1 = none, n =
  // n splits (at most kMaxSplits, fewer when there are fewer key blocks),
  // which needs SplitKvWorkspaceBytes(problem, n) of workspace. The result
  // is the same up to rounding whatever the count.
  int num_splits = 0;

  // Dense tensors for `problem` (strides from its lengths and heads; a paged
  // cache's pools [num_pages, page_size, heads_kv, head_dim]; k_new and v_new
  // shaped as q with heads_kv heads).
  static AttentionArgs Contiguous(const AttentionProblem& problem, DType dtype, const void* q,
                                  const void* k, const void* v, void* out,
                                  float* lse = nullptr);
};

}  // namespace attn

#endif  // ATTN_PROBLEM_H_
