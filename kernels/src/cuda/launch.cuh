// Definitions of LaunchFlashFwd and PrepareFlashFwd (declared in launch.h);
// included only by the generated instance_*.cu files.
#ifndef ATTN_KERNELS_SRC_CUDA_LAUNCH_CUH_
#define ATTN_KERNELS_SRC_CUDA_LAUNCH_CUH_

#include <type_traits>

#include "flash_combine_kernel.cuh"
#include "flash_fwd_kernel.cuh"
#include "hopper_launch.cuh"
#include "kv_append_kernel.cuh"
#include "launch.h"

namespace attn::fa2 {

template <DType kDType>
using ElementOf = std::conditional_t<kDType == DType::kBFloat16, __nv_bfloat16, __half>;

// The Ampere family's launches (FlashFwdKernel); a HopperFwdTile's go to
// hopper_launch.cuh.
template <class Config, DType kDType, bool kEven, bool kMasked>
cudaError_t PrepareAmpereFwd();
template <class Config, DType kDType, bool kEven, bool kMasked>
cudaError_t LaunchAmpereFwd(const FwdParams& params, cudaStream_t stream);

template <class Config, DType kDType, bool kEven, bool kMasked>
cudaError_t PrepareFlashFwd() {
  if constexpr (kIsHopperTile<Config>) {
    return PrepareHopperFwd<Config, ElementOf<kDType>, kEven, kMasked>();
  } else {
    return PrepareAmpereFwd<Config, kDType, kEven, kMasked>();
  }
}

template <class Config, DType kDType, bool kEven, bool kMasked>
cudaError_t PrepareAmpereFwd() {
  if constexpr (Config::kStaticRowStride != 0) {
    // Step 16's launches may run its general kernel: prepare that one too.
    const cudaError_t err = PrepareAmpereFwd<typename Config::General, kDType, kEven, kMasked>();
    if (err != cudaSuccess) return err;
  }
  using Shape = KernelShape<Config>;
  const auto kernel = &FlashFwdKernel<Config, ElementOf<kDType>, kEven, kMasked>;
  if constexpr (Shape::kSmemBytes > 48 * 1024) {
    // Above 48 KiB a kernel must opt in to its dynamic shared memory.
    const cudaError_t err = cudaFuncSetAttribute(
        kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, Shape::kSmemBytes);
    if (err != cudaSuccess) return err;
  }
  if constexpr (Config::kNoAllocateStores) {
    // As much of the unified L1/shared array as possible for shared memory.
    const cudaError_t err = cudaFuncSetAttribute(
        kernel, cudaFuncAttributePreferredSharedMemoryCarveout, cudaSharedmemCarveoutMaxShared);
    if (err != cudaSuccess) return err;
  }
  return cudaSuccess;
}

template <class Config, DType kDType, bool kEven, bool kMasked>
cudaError_t LaunchFlashFwd(const FwdParams& params, cudaStream_t stream) {
  if constexpr (kIsHopperTile<Config>) {
    return LaunchHopperFwd<Config, ElementOf<kDType>, kEven, kMasked>(params, stream);
  } else {
    return LaunchAmpereFwd<Config, kDType, kEven, kMasked>(params, stream);
  }
}

template <class Config, DType kDType, bool kEven, bool kMasked>
cudaError_t LaunchAmpereFwd(const FwdParams& params, cudaStream_t stream) {
  if constexpr (Config::kStaticRowStride != 0) {
    // Step 16 is a specialisation: any other row stride runs its general kernel.
    constexpr int64_t kStride = Config::kStaticRowStride;
    if (params.q_row_stride != kStride || params.kv_row_stride != kStride ||
        params.o_row_stride != kStride) {
      return LaunchAmpereFwd<typename Config::General, kDType, kEven, kMasked>(params, stream);
    }
  }
  using Shape = KernelShape<Config>;
  const auto kernel = &FlashFwdKernel<Config, ElementOf<kDType>, kEven, kMasked>;
  const dim3 grid((params.seqlen_q + Config::kBlockM - 1) / Config::kBlockM, params.heads_q,
                  params.batch);
  kernel<<<grid, Shape::kThreads, Shape::kSmemBytes, stream>>>(params);
  return cudaGetLastError();
}

template <class Config, DType kDType, bool kMasked, bool kSplit>
cudaError_t PrepareFlashDecode() {
  using Shape = KernelShape<Config>;
  const auto kernel = &FlashFwdKernel<Config, ElementOf<kDType>, false, kMasked, kSplit>;
  if constexpr (Shape::kSmemBytes > 48 * 1024) {
    const cudaError_t err = cudaFuncSetAttribute(
        kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, Shape::kSmemBytes);
    if (err != cudaSuccess) return err;
  }
  // As much shared memory as the SM has: decode CTAs are many and small.
  return cudaFuncSetAttribute(kernel, cudaFuncAttributePreferredSharedMemoryCarveout,
                              cudaSharedmemCarveoutMaxShared);
}

template <class Config, DType kDType, bool kMasked, bool kSplit>
int FlashDecodeBlocksPerSm() {
  using Shape = KernelShape<Config>;
  int blocks = 0;
  if (cudaOccupancyMaxActiveBlocksPerMultiprocessor(
          &blocks, &FlashFwdKernel<Config, ElementOf<kDType>, false, kMasked, kSplit>,
          Shape::kThreads, Shape::kSmemBytes) != cudaSuccess) {
    cudaGetLastError();
    return 1;
  }
  return blocks > 0 ? blocks : 1;
}

template <class Config, DType kDType, bool kMasked, bool kSplit>
cudaError_t LaunchFlashDecode(const FwdParams& params, cudaStream_t stream) {
  static_assert(Config::kPackGqa, "decode configurations pack a KV group's query heads");
  using Shape = KernelShape<Config>;
  if (params.k_new != nullptr) {
    // The new K/V rows go into the cache first; the attention reads them.
    const int64_t chunks = static_cast<int64_t>(params.seqlen_q) *
                           (params.heads_q / params.heads_per_kv) * (Config::kHeadDim / kChunkElems);
    const dim3 append_grid(static_cast<unsigned>((chunks + kAppendThreads - 1) / kAppendThreads),
                           params.batch);
    KvAppendKernel<Config::kHeadDim><<<append_grid, kAppendThreads, 0, stream>>>(params);
    const cudaError_t err = cudaGetLastError();
    if (err != cudaSuccess) return err;
  }
  const int rows = params.seqlen_q * params.heads_per_kv;
  const int m_blocks = (rows + Config::kBlockM - 1) / Config::kBlockM;
  const dim3 grid(m_blocks * (kSplit ? params.num_splits : 1),
                  params.heads_q / params.heads_per_kv, params.batch);
  FlashFwdKernel<Config, ElementOf<kDType>, false, kMasked, kSplit>
      <<<grid, Shape::kThreads, Shape::kSmemBytes, stream>>>(params);
  if constexpr (kSplit) {
    const cudaError_t err = cudaGetLastError();
    if (err != cudaSuccess) return err;
    cudaLaunchConfig_t combine{};
    combine.gridDim = dim3(static_cast<unsigned>(params.lse_rows));
    combine.blockDim = dim3(32 * CombineWarps(params.num_splits));
    combine.stream = stream;
    cudaLaunchAttribute dependent{};
    dependent.id = cudaLaunchAttributeProgrammaticStreamSerialization;
    dependent.val.programmaticStreamSerializationAllowed = 1;
    if (params.dependent_combine) {
      combine.attrs = &dependent;
      combine.numAttrs = 1;
    }
    return cudaLaunchKernelEx(&combine, &FlashCombineKernel<ElementOf<kDType>, Config::kHeadDim>,
                              params);
  }
  return cudaGetLastError();
}

}  // namespace attn::fa2

#define ATTN_INSTANTIATE_DECODE_VARIANT(CONFIG, DTYPE, MASKED, SPLIT)                        \
  template cudaError_t attn::fa2::LaunchFlashDecode<CONFIG, attn::DType::DTYPE, MASKED, SPLIT>( \
      const attn::fa2::FwdParams&, cudaStream_t);                                             \
  template cudaError_t attn::fa2::PrepareFlashDecode<CONFIG, attn::DType::DTYPE, MASKED, SPLIT>(); \
  template int attn::fa2::FlashDecodeBlocksPerSm<CONFIG, attn::DType::DTYPE, MASKED, SPLIT>();

// A decode configuration: every variant (what AllDecodeLaunchers takes).
#define ATTN_INSTANTIATE_DECODE(CONFIG)                              \
  ATTN_INSTANTIATE_DECODE_VARIANT(CONFIG, kFloat16, false, false)   \
  ATTN_INSTANTIATE_DECODE_VARIANT(CONFIG, kFloat16, false, true)    \
  ATTN_INSTANTIATE_DECODE_VARIANT(CONFIG, kFloat16, true, false)    \
  ATTN_INSTANTIATE_DECODE_VARIANT(CONFIG, kFloat16, true, true)     \
  ATTN_INSTANTIATE_DECODE_VARIANT(CONFIG, kBFloat16, false, false)  \
  ATTN_INSTANTIATE_DECODE_VARIANT(CONFIG, kBFloat16, false, true)   \
  ATTN_INSTANTIATE_DECODE_VARIANT(CONFIG, kBFloat16, true, false)   \
  ATTN_INSTANTIATE_DECODE_VARIANT(CONFIG, kBFloat16, true, true)

#define ATTN_INSTANTIATE_VARIANT(CONFIG, EVEN, MASKED)                                        \
  template cudaError_t                                                                        \
  attn::fa2::LaunchFlashFwd<CONFIG, attn::DType::kFloat16, EVEN, MASKED>(                    \
      const attn::fa2::FwdParams&, cudaStream_t);                                             \
  template cudaError_t                                                                        \
  attn::fa2::LaunchFlashFwd<CONFIG, attn::DType::kBFloat16, EVEN, MASKED>(                   \
      const attn::fa2::FwdParams&, cudaStream_t);                                             \
  template cudaError_t attn::fa2::PrepareFlashFwd<CONFIG, attn::DType::kFloat16, EVEN, MASKED>(); \
  template cudaError_t attn::fa2::PrepareFlashFwd<CONFIG, attn::DType::kBFloat16, EVEN, MASKED>();

// A ladder step: even lengths, no mask (what LadderLaunchers takes).
#define ATTN_INSTANTIATE_LADDER(CONFIG) ATTN_INSTANTIATE_VARIANT(CONFIG, true, false)

// A production family: every variant (what AllLaunchers takes).
#define ATTN_INSTANTIATE_ALL(CONFIG)         \
  ATTN_INSTANTIATE_VARIANT(CONFIG, true, false)  \
  ATTN_INSTANTIATE_VARIANT(CONFIG, true, true)   \
  ATTN_INSTANTIATE_VARIANT(CONFIG, false, false) \
  ATTN_INSTANTIATE_VARIANT(CONFIG, false, true)

#endif  // ATTN_KERNELS_SRC_CUDA_LAUNCH_CUH_
