// attn/cpu_reference.h
//
// CPU attention, for the service's CPU backend and as the tests' reference.
#ifndef ATTN_CPU_REFERENCE_H_
#define ATTN_CPU_REFERENCE_H_

#include <atomic>
#include <cstdint>
#include <vector>

#include "attn/cpu_thread_pool.h"
#include "attn/problem.h"
#include "attn/tensor.h"

namespace attn {

// The "cpu_reference" kernel: every feature of attn/problem.h (strides,
// GQA/MQA, causal, sliding window, seqlen_q != seqlen_k, varlen, LSE, dense
// and paged K/V caches with append; a row that sees no key gets 0 and LSE
// -inf) over host tensors in 16-bit storage,
// with float accumulation. Tiled over query rows and key blocks with an online
// softmax (the FlashAttention recurrence), so memory stays O(keys · head_dim)
// per thread; work is split over `num_threads` threads made for the call
// (0 = the cores this process may use) or a pool's. The result does not depend
// on the thread count. Assumes ValidateArgs passed for the CPU kernel (host
// pointers, cu_seqlens checked).
//
// `cancel` (optional) is read between tasks (a task is up to 64 query rows
// of one head): once it is true the remaining tasks are skipped and the call
// returns false, leaving the output partly written. Returns true when every
// row was computed.
bool AttentionCpu(const AttentionArgs& args, int num_threads = 0,
                  const std::atomic<bool>* cancel = nullptr);
// The same on `pool`'s threads.
bool AttentionCpu(const AttentionArgs& args, CpuThreadPool& pool,
                  const std::atomic<bool>* cancel = nullptr);

// Naive float64 attention, the ground truth for tests: `problem` over dense
// contiguous float inputs, q [batch, seqlen_q, heads_q, head_dim], k and v
// [batch, seqlen_k, heads_kv, head_dim] (varlen: [total, heads, head_dim],
// split by the host offsets cu_seqlens_q / cu_seqlens_k, which are ignored
// otherwise). The scale is problem.ResolvedScale(). Returns the output in q's
// layout. If `lse` is not null it receives the log-sum-exp of every query
// row in the problem's LSE layout ([batch, heads_q, seqlen_q]; varlen
// [heads_q, total_q]) whether or not problem.return_lse is set. A row that
// sees no key gets output 0 and LSE -inf.
std::vector<double> AttentionNaiveF64(const AttentionProblem& problem, const float* q,
                                      const float* k, const float* v,
                                      const int32_t* cu_seqlens_q = nullptr,
                                      const int32_t* cu_seqlens_k = nullptr,
                                      std::vector<double>* lse = nullptr);

// Non-causal self-attention on dense [B, S, H, D] float inputs with an
// explicit scale (the seed's problem; clients' --check uses it).
std::vector<double> AttentionNaiveF64(const float* q, const float* k, const float* v,
                                      const Shape& shape, double scale);

}  // namespace attn

#endif  // ATTN_CPU_REFERENCE_H_
