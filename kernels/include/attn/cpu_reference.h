// attn/cpu_reference.h
//
// CPU attention, for the service's CPU backend and as the tests' reference.
#ifndef ATTN_CPU_REFERENCE_H_
#define ATTN_CPU_REFERENCE_H_

#include <vector>

#include "absl/status/status.h"
#include "attn/tensor.h"

namespace attn {

// softmax(q·kᵀ·scale)·v over host tensors in 16-bit storage, with float
// accumulation. Tiled over query and key blocks with an online softmax (the
// FlashAttention recurrence), so memory stays O(block) per thread; work is
// split over `num_threads` threads (0 = hardware concurrency). Assumes
// ValidateArgs passed for the CPU kernel.
void AttentionCpu(const AttentionArgs& args, int num_threads = 0);

// Naive float64 attention on float inputs laid out [B, S, H, D]: the ground
// truth for tests. Returns the output in the same layout.
std::vector<double> AttentionNaiveF64(const float* q, const float* k, const float* v,
                                      const Shape& shape, double scale);

}  // namespace attn

#endif  // ATTN_CPU_REFERENCE_H_
