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

  // Non-causal self-attention over [batch, seq_len, heads, head_dim] (the
  // seed's problem, and what a request without the newer fields means).
  static AttentionProblem SelfAttention(int64_t batch, int64_t seq_len, int64_t heads,
                                        int64_t head_dim);

  float ResolvedScale() const;
  // The window with causal folded in (right side 0); -1 = unbounded.
  int64_t EffectiveWindowRight() const { return causal ? 0 : window_right; }
  bool HasMask() const { return causal || window_left >= 0 || window_right >= 0; }
  bool IsSelfAttentionShape() const {
    return seqlen_q == seqlen_k && heads_q == heads_kv && !varlen;
  }

  // Tokens of Q/O and of K/V in memory (batch * seqlen, or the varlen totals).
  int64_t QTokens() const { return varlen ? total_q : batch * seqlen_q; }
  int64_t KVTokens() const { return varlen ? total_k : batch * seqlen_k; }
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
  // sequence has the longest lengths.
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
  // choice of splits uses; given less, it does not split.
  void* workspace = nullptr;
  int64_t workspace_bytes = 0;
  // Split-KV for problems of few query rows: 0 = the kernel's choice (from
  // the problem and the device, within the workspace given), 1 = none, n =
  // n splits (at most kMaxSplits, fewer when there are fewer key blocks),
  // which needs SplitKvWorkspaceBytes(problem, n) of workspace. The result
  // is the same up to rounding whatever the count.
  int num_splits = 0;

  // Dense tensors for `problem` (strides from its lengths and heads).
  static AttentionArgs Contiguous(const AttentionProblem& problem, DType dtype, const void* q,
                                  const void* k, const void* v, void* out,
                                  float* lse = nullptr);
};

}  // namespace attn

#endif  // ATTN_PROBLEM_H_
