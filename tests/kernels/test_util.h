// Shared helpers for the kernel tests: fresh random inputs, quantised host
// tensors with their float values, and error measures against float64.
#ifndef ATTN_TESTS_KERNELS_TEST_UTIL_H_
#define ATTN_TESTS_KERNELS_TEST_UTIL_H_

#include <cstdint>
#include <string>
#include <vector>

#include "attn/problem.h"
#include "attn/tensor.h"

namespace attn::testing {

// A seed from std::random_device: every run draws new inputs. Tests print
// it so a failure can be replayed.
uint64_t FreshSeed();

// Q, K, V drawn from N(0, 1), stored as 16-bit `dtype`, plus the exact float
// value of every stored element (what a kernel actually sees). Dense
// self-attention [B, S, H, D] (the clients' and the service's tests).
struct HostInputs {
  Shape shape;
  DType dtype = DType::kBFloat16;
  uint64_t seed = 0;
  std::vector<uint16_t> q, k, v;
  std::vector<float> q_float, k_float, v_float;
};
HostInputs MakeRandomInputs(const Shape& shape, DType dtype, uint64_t seed);

// The same for a whole problem (attn/problem.h), dense and contiguous:
// q [QTokens, heads_q, head_dim], k and v [KVTokens, heads_kv, head_dim],
// with the varlen offsets when problem.varlen.
struct ProblemInputs {
  AttentionProblem problem;
  DType dtype = DType::kBFloat16;
  uint64_t seed = 0;
  std::vector<uint16_t> q, k, v;
  std::vector<float> q_float, k_float, v_float;
  std::vector<int32_t> cu_seqlens_q, cu_seqlens_k;  // varlen only
};
// `cu_seqlens_*` are required with problem.varlen and ignored otherwise.
ProblemInputs MakeProblemInputs(const AttentionProblem& problem, DType dtype, uint64_t seed,
                                std::vector<int32_t> cu_seqlens_q = {},
                                std::vector<int32_t> cu_seqlens_k = {});

// Makes `problem` varlen over sequences of the given lengths (same count):
// sets batch, seqlen_q / seqlen_k (the longest; at least 1), total_q /
// total_k, and writes the offsets.
void SetVarlen(AttentionProblem* problem, const std::vector<int32_t>& q_lens,
               const std::vector<int32_t>& k_lens, std::vector<int32_t>* cu_seqlens_q,
               std::vector<int32_t>* cu_seqlens_k);

// One [batch, seq, heads, head_dim] tensor in memory (varlen: batch 1 of the
// packed tokens) with its element strides; moves data between it and the
// dense [batch, seq, heads, head_dim] order.
struct TensorLayout {
  int64_t batch = 0, seq = 0, heads = 0, head_dim = 0;
  TensorStrides strides;

  static TensorLayout Dense(int64_t batch, int64_t seq, int64_t heads, int64_t head_dim);
  // Every step skips elements (head: pad, row: 2·pad, batch: 3·pad more than
  // dense), so touching anything between the tensor's elements shows.
  static TensorLayout Padded(int64_t batch, int64_t seq, int64_t heads, int64_t head_dim,
                             int64_t pad);
  // Q/O (or K/V) of `problem` (dense or padded).
  static TensorLayout ForQ(const AttentionProblem& problem, int64_t pad = 0);
  static TensorLayout ForKV(const AttentionProblem& problem, int64_t pad = 0);

  int64_t Elements() const;  // span in memory, first to one past the last
  int64_t At(int64_t b, int64_t t, int64_t h) const {
    return b * strides.batch + t * strides.row + h * strides.head;
  }
  // Dense into this layout, everything else `fill`.
  std::vector<uint16_t> Scatter(const std::vector<uint16_t>& dense, uint16_t fill) const;
  std::vector<uint16_t> Gather(const std::vector<uint16_t>& laid_out) const;
  // Elements outside the tensor that are not `fill`.
  int64_t CountPaddingNot(const std::vector<uint16_t>& laid_out, uint16_t fill) const;
};

// A 16-bit NaN pattern to poison outputs with before a run.
inline constexpr uint16_t kPoisonBits = 0x7fff;

// ‖out − ref‖₂ / ‖ref‖₂ over all elements (out in 16-bit `dtype`); the
// absolute ‖out − ref‖₂ when ref is all zero.
double RelativeL2Error(const std::vector<uint16_t>& out, DType dtype,
                       const std::vector<double>& ref);
double RelativeL2Error(const std::vector<float>& out, const std::vector<double>& ref);

// Number of elements of `out` that are NaN or infinite (unwritten poison
// shows up here).
int64_t CountNonFinite(const std::vector<uint16_t>& out, DType dtype);

// The largest |lse − ref| over rows with a finite reference; +inf if a row's
// -inf (no visible key) does not match exactly or a value is NaN.
double MaxLseError(const std::vector<float>& lse, const std::vector<double>& ref);

// "dtype=bf16 shape=[...] seed=..." for failure messages.
// A dense (not varlen) problem with LSE, for the kernel tests' case lists.
AttentionProblem DenseProblem(int64_t batch, int64_t seqlen_q, int64_t seqlen_k, int64_t heads_q,
                              int64_t heads_kv, int64_t head_dim, bool causal = false,
                              bool lse = true);

std::string Describe(const HostInputs& inputs);
std::string Describe(const ProblemInputs& inputs);

}  // namespace attn::testing

#endif  // ATTN_TESTS_KERNELS_TEST_UTIL_H_
