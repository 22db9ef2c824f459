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
// so their K/V reads broadcast.
__global__ void ReferenceKernel(const void* q, const void* k, const void* v, float* out,
                                int seq_len, int num_heads, int head_dim, float scale,
                                bool bf16) {
  const int row = blockIdx.x * blockDim.x + threadIdx.x;
  if (row >= seq_len) return;
  const int head = blockIdx.y;
  const int batch = blockIdx.z;
  const int64_t row_stride = static_cast<int64_t>(num_heads) * head_dim;
  const int64_t base = static_cast<int64_t>(batch) * seq_len * row_stride + head * head_dim;

  float query[kMaxHeadDim];
  for (int d = 0; d < head_dim; ++d) query[d] = Load(q, base + row * row_stride + d, bf16);

  float max_score = -INFINITY;
  for (int j = 0; j < seq_len; ++j) {
    float dot = 0.0f;
    for (int d = 0; d < head_dim; ++d) dot += query[d] * Load(k, base + j * row_stride + d, bf16);
    max_score = fmaxf(max_score, dot * scale);
  }
  float acc[kMaxHeadDim];
  for (int d = 0; d < head_dim; ++d) acc[d] = 0.0f;
  float sum = 0.0f;
  for (int j = 0; j < seq_len; ++j) {
    float dot = 0.0f;
    for (int d = 0; d < head_dim; ++d) dot += query[d] * Load(k, base + j * row_stride + d, bf16);
    const float p = expf(dot * scale - max_score);
    sum += p;
    for (int d = 0; d < head_dim; ++d) acc[d] += p * Load(v, base + j * row_stride + d, bf16);
  }
  for (int d = 0; d < head_dim; ++d) out[base + row * row_stride + d] = acc[d] / sum;
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

cudaError_t LaunchReferenceAttention(const void* q, const void* k, const void* v, float* out,
                                     int batch, int seq_len, int num_heads, int head_dim,
                                     float scale, bool bf16, cudaStream_t stream) {
  constexpr int kThreads = 128;
  const dim3 grid((seq_len + kThreads - 1) / kThreads, num_heads, batch);
  ReferenceKernel<<<grid, kThreads, 0, stream>>>(q, k, v, out, seq_len, num_heads, head_dim,
                                                 scale, bf16);
  return cudaGetLastError();
}

cudaError_t LaunchFillRandomNormal(void* data, int64_t count, uint64_t seed, bool bf16,
                                   cudaStream_t stream) {
  FillKernel<<<1024, 256, 0, stream>>>(data, count, seed, bf16);
  return cudaGetLastError();
}

}  // namespace attn::fa2
