#include "attn/gpu_reference.h"

#include <string>

#include "absl/strings/str_cat.h"
#include "attn/attention.h"
#include "reference_launch.h"

namespace attn {
namespace {

absl::Status ToStatus(cudaError_t err, const char* what) {
  if (err == cudaSuccess) return absl::OkStatus();
  return absl::InternalError(absl::StrCat(what, ": ", cudaGetErrorString(err)));
}

// The rules the reference is checked by: a GPU kernel with every feature.
const KernelInfo& ReferenceInfo() {
  static const KernelInfo* info = [] {
    auto* k = new KernelInfo;
    k->name = "gpu_reference";
    k->backend = Backend::kCuda;
    KernelCapabilities& caps = k->caps;
    caps.causal = caps.window = caps.gqa = caps.seqlen_q_ne_k = caps.lse = caps.varlen =
        caps.strided = true;
    return k;
  }();
  return *info;
}

}  // namespace

absl::Status AttentionGpuReference(const AttentionArgs& args, float* out_f32,
                                   CUstream_st* stream, float* lse_f32) {
  const AttentionProblem& p = args.problem;
  // The output and LSE are ours, dense; check the rest as for a kernel.
  AttentionArgs checked = args;
  checked.out = out_f32;
  checked.out_strides = ContiguousStrides(p.seqlen_q, p.heads_q, p.head_dim);
  checked.lse = lse_f32;
  checked.problem.return_lse = lse_f32 != nullptr;
  if (absl::Status st = ValidateArgs(checked, ReferenceInfo()); !st.ok()) return st;
  if (p.head_dim > fa2::kMaxHeadDim) {
    return absl::InvalidArgumentError(absl::StrCat("head_dim is ", p.head_dim,
                                                   "; AttentionGpuReference supports up to ",
                                                   fa2::kMaxHeadDim));
  }
  fa2::ReferenceParams r;
  r.q = args.q;
  r.k = args.k;
  r.v = args.v;
  r.out = out_f32;
  r.lse = lse_f32;
  r.varlen = p.varlen;
  r.cu_seqlens_q = p.varlen ? args.cu_seqlens_q : nullptr;
  r.cu_seqlens_k = p.varlen ? args.cu_seqlens_k : nullptr;
  r.q_batch_stride = args.q_strides.batch;
  r.q_row_stride = args.q_strides.row;
  r.q_head_stride = args.q_strides.head;
  r.k_batch_stride = args.k_strides.batch;
  r.k_row_stride = args.k_strides.row;
  r.k_head_stride = args.k_strides.head;
  r.v_batch_stride = args.v_strides.batch;
  r.v_row_stride = args.v_strides.row;
  r.v_head_stride = args.v_strides.head;
  r.batch = static_cast<int>(p.batch);
  r.seqlen_q = static_cast<int>(p.seqlen_q);
  r.seqlen_k = static_cast<int>(p.seqlen_k);
  r.heads_q = static_cast<int>(p.heads_q);
  r.heads_kv = static_cast<int>(p.heads_kv);
  r.head_dim = static_cast<int>(p.head_dim);
  r.total_q = p.total_q;
  r.window_left = p.window_left;
  r.window_right = p.EffectiveWindowRight();
  r.scale = p.ResolvedScale();
  r.bf16 = args.dtype == DType::kBFloat16;
  return ToStatus(fa2::LaunchReferenceAttention(r, stream), "AttentionGpuReference launch");
}

absl::Status FillRandomNormal(void* data, DType dtype, int64_t count, uint64_t seed,
                              CUstream_st* stream) {
  return ToStatus(
      fa2::LaunchFillRandomNormal(data, count, seed, dtype == DType::kBFloat16, stream),
      "FillRandomNormal launch");
}

}  // namespace attn
