// attn/gpu_reference.h
//
// Device-side helpers for tests and benchmarks: a naive float32 attention to
// check fast kernels against at sizes where a CPU float64 reference is too
// slow, and a random-input generator. Not for serving. In builds without CUDA
// both return FAILED_PRECONDITION.
#ifndef ATTN_GPU_REFERENCE_H_
#define ATTN_GPU_REFERENCE_H_

#include <cstdint>

#include "absl/status/status.h"
#include "attn/tensor.h"

struct CUstream_st;

namespace attn {

// out_f32 = softmax(q·kᵀ·scale)·v in float32 arithmetic, one thread per query
// row, two passes (row max, then exponentials and the weighted sum). q, k, v
// are device tensors as for Forward (args.out is ignored); out_f32 is a device
// array of q.shape.NumElements() floats in the same layout. head_dim <= 256.
absl::Status AttentionGpuReference(const AttentionArgs& args, float* out_f32,
                                   CUstream_st* stream);

// Fills `count` 16-bit elements at device pointer `data` with N(0, 1) samples
// (Box-Muller on a counter-based hash of (seed, index)), rounded to `dtype`.
absl::Status FillRandomNormal(void* data, DType dtype, int64_t count, uint64_t seed,
                              CUstream_st* stream);

}  // namespace attn

#endif  // ATTN_GPU_REFERENCE_H_
