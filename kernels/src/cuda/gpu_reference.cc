#include "attn/gpu_reference.h"

#include <string>

#include "absl/strings/str_cat.h"
#include "reference_launch.h"

namespace attn {
namespace {

absl::Status ToStatus(cudaError_t err, const char* what) {
  if (err == cudaSuccess) return absl::OkStatus();
  return absl::InternalError(absl::StrCat(what, ": ", cudaGetErrorString(err)));
}

}  // namespace

absl::Status AttentionGpuReference(const AttentionArgs& args, float* out_f32,
                                   CUstream_st* stream) {
  const Shape& s = args.q.shape;
  if (s.head_dim > fa2::kMaxHeadDim) {
    return absl::InvalidArgumentError(
        absl::StrCat("AttentionGpuReference supports head_dim <= ", fa2::kMaxHeadDim));
  }
  return ToStatus(fa2::LaunchReferenceAttention(
                      args.q.data, args.k.data, args.v.data, out_f32, static_cast<int>(s.batch),
                      static_cast<int>(s.seq_len), static_cast<int>(s.num_heads),
                      static_cast<int>(s.head_dim), args.ResolvedScale(),
                      args.q.dtype == DType::kBFloat16, stream),
                  "AttentionGpuReference launch");
}

absl::Status FillRandomNormal(void* data, DType dtype, int64_t count, uint64_t seed,
                              CUstream_st* stream) {
  return ToStatus(
      fa2::LaunchFillRandomNormal(data, count, seed, dtype == DType::kBFloat16, stream),
      "FillRandomNormal launch");
}

}  // namespace attn
