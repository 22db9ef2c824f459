// Launchers of the device-side test helpers (gpu_reference.cu), wrapped with
// absl::Status by gpu_reference.cc.
#ifndef ATTN_KERNELS_SRC_CUDA_REFERENCE_LAUNCH_H_
#define ATTN_KERNELS_SRC_CUDA_REFERENCE_LAUNCH_H_

#include <cuda_runtime_api.h>

#include <cstdint>

namespace attn::fa2 {

inline constexpr int kMaxHeadDim = 256;

cudaError_t LaunchReferenceAttention(const void* q, const void* k, const void* v, float* out,
                                     int batch, int seq_len, int num_heads, int head_dim,
                                     float scale, bool bf16, cudaStream_t stream);

cudaError_t LaunchFillRandomNormal(void* data, int64_t count, uint64_t seed, bool bf16,
                                   cudaStream_t stream);

}  // namespace attn::fa2

#endif  // ATTN_KERNELS_SRC_CUDA_REFERENCE_LAUNCH_H_
