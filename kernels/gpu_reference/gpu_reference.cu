// Naive float32 attention and a random-input generator (attn/gpu_reference.h;
// host wrappers in gpu_reference.cc). Deliberately simple: correctness here is
// what the fast kernels are judged by.
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime_api.h>

#include <cstdint>
#include <string>

#include "reference_launch.h"

namespace attn::fa2 {
namespace {

__device__ __forceinline__ float Load(const void* p, int64_t i, bool bf16) {
  return bf16 ? __bfloat162float(static_cast<const __nv_bfloat16*>(p)[i])
              : __half2float(static_cast<const __half*>(p)[i]);
}

// One thread per (batch, head, query row); threads of a block share a head,
// so their K/V reads broadcast. Varlen: grid x covers the longest sequence and
// threads past their own sequence's end return.
__global__ void ReferenceKernel(const ReferenceParams p) {
  const int64_t row = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x;
  const int head = blockIdx.y;
  const int batch = blockIdx.z;
  int64_t q_token0 = 0, k_token0 = 0, sq = p.seqlen_q, sk = p.seqlen_k;
  if (p.varlen) {
    q_token0 = p.cu_seqlens_q[batch];
    k_token0 = p.cu_seqlens_k[batch];
    sq = p.cu_seqlens_q[batch + 1] - q_token0;
    sk = p.cu_seqlens_k[batch + 1] - k_token0;
  }
  if (row >= sq) return;
  const int head_kv = head / (p.heads_q / p.heads_kv);
  // Element offsets of this row's query and of key/value token 0 of its head.
  const int64_t q_base = (p.varlen ? 0 : batch * p.q_batch_stride) +
                         (q_token0 + row) * p.q_row_stride + head * p.q_head_stride;
  const int64_t k_base = (p.varlen ? 0 : batch * p.k_batch_stride) +
                         k_token0 * p.k_row_stride + head_kv * p.k_head_stride;
  const int64_t v_base = (p.varlen ? 0 : batch * p.v_batch_stride) +
                         k_token0 * p.v_row_stride + head_kv * p.v_head_stride;
  const int64_t q_token = (p.varlen ? 0 : static_cast<int64_t>(batch) * p.seqlen_q) + q_token0 + row;
  float* out = p.out + (q_token * p.heads_q + head) * p.head_dim;

  // Visible keys [lo, hi], bottom-right aligned.
  const int64_t diagonal = row + sk - sq;
  int64_t lo = 0, hi = sk - 1;
  if (p.window_left >= 0) lo = max(lo, diagonal - p.window_left);
  if (p.window_right >= 0) hi = min(hi, diagonal + p.window_right);

  float query[kMaxHeadDim];
  for (int d = 0; d < p.head_dim; ++d) query[d] = Load(p.q, q_base + d, p.bf16);

  float max_score = -INFINITY;
  for (int64_t j = lo; j <= hi; ++j) {
    float dot = 0.0f;
    for (int d = 0; d < p.head_dim; ++d) {
      dot += query[d] * Load(p.k, k_base + j * p.k_row_stride + d, p.bf16);
    }
    max_score = fmaxf(max_score, dot * p.scale);
  }
  float acc[kMaxHeadDim];
  for (int d = 0; d < p.head_dim; ++d) acc[d] = 0.0f;
  float sum = 0.0f;
  for (int64_t j = lo; j <= hi; ++j) {
    float dot = 0.0f;
    for (int d = 0; d < p.head_dim; ++d) {
      dot += query[d] * Load(p.k, k_base + j * p.k_row_stride + d, p.bf16);
    }
    const float weight = expf(dot * p.scale - max_score);
    sum += weight;
    for (int d = 0; d < p.head_dim; ++d) {
      acc[d] += weight * Load(p.v, v_base + j * p.v_row_stride + d, p.bf16);
    }
  }
  // A row that sees no key: output 0, LSE -inf.
  const float inv_sum = sum > 0.0f ? 1.0f / sum : 0.0f;
  for (int d = 0; d < p.head_dim; ++d) out[d] = acc[d] * inv_sum;
  if (p.lse != nullptr) {
    const int64_t index = p.varlen ? head * p.total_q + q_token0 + row
                                   : (static_cast<int64_t>(batch) * p.heads_q + head) * p.seqlen_q + row;
    p.lse[index] = sum > 0.0f ? max_score + logf(sum) : -INFINITY;
  }
}

__device__ __forceinline__ uint64_t Mix(uint64_t x) {  // splitmix64 finaliser
  x ^= x >> 30;
  x *= 0xbf58476d1ce4e5b9ull;
  x ^= x >> 27;
  x *= 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

__global__ void FillKernel(void* data, int64_t count, uint64_t seed, bool bf16) {
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < count;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const uint64_t bits = Mix(seed ^ Mix(static_cast<uint64_t>(i)));
    const float u1 = (static_cast<float>(bits >> 40) + 1.0f) * (1.0f / 16777217.0f);  // (0, 1]
    const float u2 = static_cast<float>((bits >> 16) & 0xffffff) * (1.0f / 16777216.0f);
    const float value = sqrtf(-2.0f * logf(u1)) * cospif(2.0f * u2);
    if (bf16) {
      static_cast<__nv_bfloat16*>(data)[i] = __float2bfloat16_rn(value);
    } else {
      static_cast<__half*>(data)[i] = __float2half_rn(value);
    }
  }
}

}  // namespace

cudaError_t LaunchReferenceAttention(const ReferenceParams& params, cudaStream_t stream) {
  constexpr int kThreads = 128;
  const dim3 grid(static_cast<unsigned>((params.seqlen_q + kThreads - 1) / kThreads),
                  params.heads_q, params.batch);
  ReferenceKernel<<<grid, kThreads, 0, stream>>>(params);
  return cudaGetLastError();
}

cudaError_t LaunchFillRandomNormal(void* data, int64_t count, uint64_t seed, bool bf16,
                                   cudaStream_t stream) {
  FillKernel<<<1024, 256, 0, stream>>>(data, count, seed, bf16);
  return cudaGetLastError();
}

}  // namespace attn::fa2
