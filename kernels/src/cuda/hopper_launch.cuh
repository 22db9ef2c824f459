// The hopper family's launch (launch.cuh forwards LaunchFlashFwd and
// PrepareFlashFwd of a HopperFwdTile here): the tensor maps of Q, K and V
// made on the host for each launch, then HopperFwdKernel.
#ifndef ATTN_KERNELS_SRC_CUDA_HOPPER_LAUNCH_CUH_
#define ATTN_KERNELS_SRC_CUDA_HOPPER_LAUNCH_CUH_

#include <cuda.h>
#include <cudaTypedefs.h>
#include <cuda_runtime_api.h>

#include <cstdint>
#include <type_traits>

#include "hopper_fwd_kernel.cuh"

namespace attn::fa2 {

// cuTensorMapEncodeTiled from the driver, through the runtime (the
// libraries link the runtime only); null when the driver has none.
inline PFN_cuTensorMapEncodeTiled_v12000 TensorMapEncoder() {
  static const PFN_cuTensorMapEncodeTiled_v12000 encode = [] {
    void* fn = nullptr;
    cudaDriverEntryPointQueryResult found{};
    if (cudaGetDriverEntryPointByVersion("cuTensorMapEncodeTiled", &fn, 12000, cudaEnableDefault,
                                         &found) != cudaSuccess ||
        found != cudaDriverEntryPointSuccess) {
      cudaGetLastError();
      return static_cast<PFN_cuTensorMapEncodeTiled_v12000>(nullptr);
    }
    return reinterpret_cast<PFN_cuTensorMapEncodeTiled_v12000>(fn);
  }();
  return encode;
}

// A 4-d map of a [batch, rows, heads, head_dim] tensor of 16-bit T (strides
// in elements), boxes of 64 columns x `box_rows` rows, 128-byte swizzled.
// False when TMA cannot address it (a stride not a multiple of 16 bytes).
template <class T>
bool EncodeTensorMap(CUtensorMap* map, const void* base, int64_t head_dim, int64_t rows,
                     int64_t heads, int64_t batch, int64_t row_stride, int64_t head_stride,
                     int64_t batch_stride, int box_rows) {
  const PFN_cuTensorMapEncodeTiled_v12000 encode = TensorMapEncoder();
  if (encode == nullptr) return false;
  constexpr int64_t kBytes = 2;
  const cuuint64_t dims[4] = {static_cast<cuuint64_t>(head_dim), static_cast<cuuint64_t>(rows),
                              static_cast<cuuint64_t>(heads), static_cast<cuuint64_t>(batch)};
  // A batch of one (varlen) has no stride to speak of: any valid one.
  const int64_t batch_bytes = batch > 1 ? batch_stride * kBytes : 16;
  const cuuint64_t strides[3] = {static_cast<cuuint64_t>(row_stride * kBytes),
                                 static_cast<cuuint64_t>(head_stride * kBytes),
                                 static_cast<cuuint64_t>(batch_bytes)};
  for (cuuint64_t stride : strides) {
    if (stride % 16 != 0 || stride >= (cuuint64_t{1} << 40)) return false;
  }
  const cuuint32_t box[4] = {64, static_cast<cuuint32_t>(box_rows), 1, 1};
  const cuuint32_t element_strides[4] = {1, 1, 1, 1};
  const CUtensorMapDataType type = std::is_same_v<T, __nv_bfloat16>
                                       ? CU_TENSOR_MAP_DATA_TYPE_BFLOAT16
                                       : CU_TENSOR_MAP_DATA_TYPE_FLOAT16;
  return encode(map, type, 4, const_cast<void*>(base), dims, strides, box, element_strides,
                CU_TENSOR_MAP_INTERLEAVE_NONE, CU_TENSOR_MAP_SWIZZLE_128B,
                CU_TENSOR_MAP_L2_PROMOTION_L2_256B,
                CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE) == CUDA_SUCCESS;
}

template <class Config, class T, bool kEven, bool kMasked>
cudaError_t PrepareHopperFwd() {
  return cudaFuncSetAttribute(&HopperFwdKernel<Config, T, kEven, kMasked>,
                              cudaFuncAttributeMaxDynamicSharedMemorySize,
                              HopperShape<Config>::kSmemBytes);
}

// cudaErrorNotSupported when the tensors are not TMA-addressable (the
// registry then runs the next family).
template <class Config, class T, bool kEven, bool kMasked>
cudaError_t LaunchHopperFwd(const FwdParams& params, cudaStream_t stream) {
  HopperFwdParams hp;
  hp.p = params;
  const bool varlen_q = params.cu_seqlens_q != nullptr;
  const bool varlen_k = params.cu_seqlens_k != nullptr;
  const int heads_kv = params.heads_q / params.heads_per_kv;
  const int64_t batch_q = varlen_q ? 1 : params.batch;
  const int64_t batch_k = varlen_k ? 1 : params.batch;
  const int64_t rows_q = varlen_q ? params.total_q : params.seqlen_q;
  const int64_t rows_k = varlen_k ? params.total_k : params.seqlen_k;
  if (!EncodeTensorMap<T>(&hp.q_map, params.q, Config::kHeadDim, rows_q, params.heads_q, batch_q,
                          params.q_row_stride, params.q_head_stride, params.q_batch_stride,
                          Config::kBlockM) ||
      !EncodeTensorMap<T>(&hp.k_map, params.k, Config::kHeadDim, rows_k, heads_kv, batch_k,
                          params.kv_row_stride, params.k_head_stride, params.k_batch_stride,
                          Config::kBlockN) ||
      !EncodeTensorMap<T>(&hp.v_map, params.v, Config::kHeadDim, rows_k, heads_kv, batch_k,
                          params.kv_row_stride, params.v_head_stride, params.v_batch_stride,
                          Config::kBlockN)) {
    return cudaErrorNotSupported;
  }
  const dim3 grid((params.seqlen_q + Config::kBlockM - 1) / Config::kBlockM, params.heads_q,
                  params.batch);
  HopperFwdKernel<Config, T, kEven, kMasked>
      <<<grid, HopperShape<Config>::kThreads, HopperShape<Config>::kSmemBytes, stream>>>(hp);
  return cudaGetLastError();
}

}  // namespace attn::fa2

#endif  // ATTN_KERNELS_SRC_CUDA_HOPPER_LAUNCH_CUH_
