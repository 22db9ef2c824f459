// attn/gpu_reference.h
//
// attn::gpu_reference (CUDA builds only): device-side helpers for tests and
// benchmarks, a naive float32 attention to check fast kernels against at
// sizes where a CPU float64 reference is too slow, and a random-input
// generator. Not for serving: no server links it.
#ifndef ATTN_GPU_REFERENCE_H_
#define ATTN_GPU_REFERENCE_H_

#include <cstdint>

#include "absl/status/status.h"
#include "attn/problem.h"

struct CUstream_st;

namespace attn {

// Attention in float32 arithmetic, one thread per query row, two passes (row
// maximum, then exponentials and the weighted sum), with every feature of
// attn/problem.h (strides, GQA/MQA, causal, window, seqlen_q != seqlen_k,
// varlen, LSE; a row that sees no key gets 0 and LSE -inf). head_dim <= 256.
//
// q, k, v (with their strides) and cu_seqlens are device memory as for
// Forward; args.out, args.out_strides and args.lse are ignored. The output
// goes to `out_f32`, a device array of problem.QElements() floats, dense in
// q's token order: [batch, seqlen_q, heads_q, head_dim] (varlen: [total_q,
// heads_q, head_dim]). If `lse_f32` is not null, the LSE of every query row
// goes there (problem.QTokens() · heads_q floats, the problem's LSE layout:
// [batch, heads_q, seqlen_q]; varlen [heads_q, total_q]) whatever
// problem.return_lse says. Arguments are checked as ValidateArgs checks a
// GPU kernel that has every feature (INVALID_ARGUMENT); the launch is
// asynchronous on `stream`.
absl::Status AttentionGpuReference(const AttentionArgs& args, float* out_f32,
                                   CUstream_st* stream, float* lse_f32 = nullptr);

// Fills `count` 16-bit elements at device pointer `data` with N(0, 1) samples
// (Box-Muller on a counter-based hash of (seed, index)), rounded to `dtype`.
absl::Status FillRandomNormal(void* data, DType dtype, int64_t count, uint64_t seed,
                              CUstream_st* stream);

}  // namespace attn

#endif  // ATTN_GPU_REFERENCE_H_
