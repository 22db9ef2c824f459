// Host-side declarations of the kernel's launchers, explicitly instantiated
// in generated instance_*.cu files (kernels/cmake/KernelFamilies.cmake), so
// nvcc compiles the variants in parallel and host code never sees device
// code.
#ifndef ATTN_KERNELS_SRC_CUDA_LAUNCH_H_
#define ATTN_KERNELS_SRC_CUDA_LAUNCH_H_

#include <cuda_runtime_api.h>

#include "attn/dtype.h"
#include "fwd_params.h"

namespace attn::fa2 {

// Launches FlashFwdKernel<Config, kDType, kEven, kMasked> on `stream`: grid,
// block and dynamic shared memory come from the configuration and params.
// Returns the launch's error (execution errors surface at the next
// synchronisation). PrepareFlashFwd of the same variant must have run on
// the current device first.
template <class Config, DType kDType, bool kEven, bool kMasked>
cudaError_t LaunchFlashFwd(const FwdParams& params, cudaStream_t stream);

// Sets the variant's launch attributes on the current device (dynamic
// shared memory above 48 KiB, the shared-memory carveout): once per device,
// before its first launch.
template <class Config, DType kDType, bool kEven, bool kMasked>
cudaError_t PrepareFlashFwd();

// The decode configurations' launches (GQA-packed tiles, kernel_config.h):
// FlashFwdKernel<Config, kDType, kEven = false, kMasked, kSplit>; with
// kSplit, params.num_splits CTAs per query block write the workspace and
// FlashCombineKernel reduces it into O and the LSE, on the same stream.
// With params.k_new, KvAppendKernel writes the new K/V rows into the cache
// first, on the same stream.
template <class Config, DType kDType, bool kMasked, bool kSplit>
cudaError_t LaunchFlashDecode(const FwdParams& params, cudaStream_t stream);
template <class Config, DType kDType, bool kMasked, bool kSplit>
cudaError_t PrepareFlashDecode();
// CTAs of the variant resident per SM on the current device.
template <class Config, DType kDType, bool kMasked, bool kSplit>
int FlashDecodeBlocksPerSm();

using LaunchFn = cudaError_t (*)(const FwdParams&, cudaStream_t);
using PrepareFn = cudaError_t (*)();
using OccupancyFn = int (*)();

// One compiled variant of a configuration.
struct Variant {
  LaunchFn launch = nullptr;
  PrepareFn prepare = nullptr;
  OccupancyFn blocks_per_sm = nullptr;  // decode variants only
};

// A decode configuration's variants, by [bf16][masked][split].
struct DecodeLaunchers {
  Variant fn[2][2][2] = {};
  const Variant& Get(DType dtype, bool masked, bool split) const {
    return fn[dtype == DType::kBFloat16][masked][split];
  }
};

template <class Config, DType kDType, bool kMasked, bool kSplit>
constexpr Variant DecodeVariantOf() {
  return {&LaunchFlashDecode<Config, kDType, kMasked, kSplit>,
          &PrepareFlashDecode<Config, kDType, kMasked, kSplit>,
          &FlashDecodeBlocksPerSm<Config, kDType, kMasked, kSplit>};
}

template <class Config>
DecodeLaunchers AllDecodeLaunchers() {
  DecodeLaunchers l;
  l.fn[0][0][0] = DecodeVariantOf<Config, DType::kFloat16, false, false>();
  l.fn[0][0][1] = DecodeVariantOf<Config, DType::kFloat16, false, true>();
  l.fn[0][1][0] = DecodeVariantOf<Config, DType::kFloat16, true, false>();
  l.fn[0][1][1] = DecodeVariantOf<Config, DType::kFloat16, true, true>();
  l.fn[1][0][0] = DecodeVariantOf<Config, DType::kBFloat16, false, false>();
  l.fn[1][0][1] = DecodeVariantOf<Config, DType::kBFloat16, false, true>();
  l.fn[1][1][0] = DecodeVariantOf<Config, DType::kBFloat16, true, false>();
  l.fn[1][1][1] = DecodeVariantOf<Config, DType::kBFloat16, true, true>();
  return l;
}

template <class Config, DType kDType, bool kEven, bool kMasked>
constexpr Variant VariantOf() {
  return {&LaunchFlashFwd<Config, kDType, kEven, kMasked>,
          &PrepareFlashFwd<Config, kDType, kEven, kMasked>};
}

// The variants of one configuration, by [bf16][even][masked]; empty where a
// variant is not instantiated (the ladder has only even, unmasked ones).
struct Launchers {
  Variant fn[2][2][2] = {};
  const Variant& Get(DType dtype, bool even, bool masked) const {
    return fn[dtype == DType::kBFloat16][even][masked];
  }
  // True when only even lengths (whole blocks) have a variant.
  bool EvenOnly() const {
    return fn[0][0][0].launch == nullptr && fn[1][0][0].launch == nullptr;
  }
};

// Ladder steps: the seed's problem only (even lengths, no mask).
template <class Config>
Launchers LadderLaunchers() {
  Launchers l;
  l.fn[0][1][0] = VariantOf<Config, DType::kFloat16, true, false>();
  l.fn[1][1][0] = VariantOf<Config, DType::kBFloat16, true, false>();
  return l;
}

// The production kernel: every variant.
template <class Config>
Launchers AllLaunchers() {
  Launchers l;
  l.fn[0][0][0] = VariantOf<Config, DType::kFloat16, false, false>();
  l.fn[0][0][1] = VariantOf<Config, DType::kFloat16, false, true>();
  l.fn[0][1][0] = VariantOf<Config, DType::kFloat16, true, false>();
  l.fn[0][1][1] = VariantOf<Config, DType::kFloat16, true, true>();
  l.fn[1][0][0] = VariantOf<Config, DType::kBFloat16, false, false>();
  l.fn[1][0][1] = VariantOf<Config, DType::kBFloat16, false, true>();
  l.fn[1][1][0] = VariantOf<Config, DType::kBFloat16, true, false>();
  l.fn[1][1][1] = VariantOf<Config, DType::kBFloat16, true, true>();
  return l;
}

}  // namespace attn::fa2

#endif  // ATTN_KERNELS_SRC_CUDA_LAUNCH_H_
