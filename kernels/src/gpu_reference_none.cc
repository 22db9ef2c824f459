// attn/gpu_reference.h in a build without CUDA.
#include "attn/gpu_reference.h"

namespace attn {

absl::Status AttentionGpuReference(const AttentionArgs&, float*, CUstream_st*, float*) {
  return absl::FailedPreconditionError("AttentionGpuReference needs a CUDA build");
}

absl::Status FillRandomNormal(void*, DType, int64_t, uint64_t, CUstream_st*) {
  return absl::FailedPreconditionError("FillRandomNormal needs a CUDA build");
}

}  // namespace attn
