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
std::string Describe(const HostInputs& inputs);
std::string Describe(const ProblemInputs& inputs);

}  // namespace attn::testing

#endif  // ATTN_TESTS_KERNELS_TEST_UTIL_H_
