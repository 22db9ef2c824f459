#include "attn/c_api.h"

#include <algorithm>
#include <cstring>
#include <string>

#include "attn/attention.h"
#include "attn/c_boundary.h"
#include "attn/ladder.h"
#include "attn/validate.h"

namespace {

using ::attn::DTypeFromC;
using ::attn::ReportToC;

// The C ABI serves the ladder too (bench/ladder_table.py): registered
// (once; later calls do nothing) before any entry point looks a kernel up.
void RegisterLibraries() { attn::ladder::Register(); }

}  // namespace

extern "C" int attn_forward(const char* kernel, int dtype, const void* q, const void* k,
                            const void* v, void* out, int64_t batch, int64_t seq_len,
                            int64_t num_heads, int64_t head_dim, float softmax_scale,
                            void* stream, char* error, size_t error_size) {
  RegisterLibraries();
  if (kernel == nullptr) {
    return ReportToC(absl::InvalidArgumentError("kernel is NULL"), error, error_size);
  }
  absl::StatusOr<attn::DType> type = DTypeFromC(dtype);
  if (!type.ok()) return ReportToC(type.status(), error, error_size);
  attn::AttentionProblem problem =
      attn::AttentionProblem::SelfAttention(batch, seq_len, num_heads, head_dim);
  problem.softmax_scale = softmax_scale;
  const attn::AttentionArgs args = attn::AttentionArgs::Contiguous(problem, *type, q, k, v, out);
  return ReportToC(attn::Forward(args, kernel, static_cast<CUstream_st*>(stream)), error,
                error_size);
}

namespace {

// attn_forward_ex's problem and arguments.
absl::StatusOr<attn::AttentionArgs> ExArgs(int dtype, const void* q, const void* k,
                                           const void* v, void* out, float* lse,
                                           const int32_t* cu_seqlens_q,
                                           const int32_t* cu_seqlens_k, int64_t batch,
                                           int64_t seqlen_q, int64_t seqlen_k, int64_t heads_q,
                                           int64_t heads_kv, int64_t head_dim, int causal,
                                           int64_t window_left, int64_t window_right,
                                           float softmax_scale, int64_t total_q,
                                           int64_t total_k) {
  absl::StatusOr<attn::DType> type = DTypeFromC(dtype);
  if (!type.ok()) return type.status();
  attn::AttentionProblem problem;
  problem.batch = batch;
  problem.seqlen_q = seqlen_q;
  problem.seqlen_k = seqlen_k;
  problem.heads_q = heads_q;
  problem.heads_kv = heads_kv;
  problem.head_dim = head_dim;
  problem.causal = causal != 0;
  problem.window_left = window_left;
  problem.window_right = window_right;
  problem.softmax_scale = softmax_scale;
  problem.return_lse = lse != nullptr;
  // Either offset array makes it varlen; ValidateArgs names a missing one.
  problem.varlen = cu_seqlens_q != nullptr || cu_seqlens_k != nullptr;
  if (problem.varlen) {
    problem.total_q = total_q;
    problem.total_k = total_k;
  }
  attn::AttentionArgs args = attn::AttentionArgs::Contiguous(problem, *type, q, k, v, out, lse);
  args.cu_seqlens_q = cu_seqlens_q;
  args.cu_seqlens_k = cu_seqlens_k;
  return args;
}

}  // namespace

extern "C" int attn_forward_ex(const char* kernel, int dtype, const void* q, const void* k,
                               const void* v, void* out, float* lse,
                               const int32_t* cu_seqlens_q, const int32_t* cu_seqlens_k,
                               int64_t batch, int64_t seqlen_q, int64_t seqlen_k,
                               int64_t heads_q, int64_t heads_kv, int64_t head_dim, int causal,
                               int64_t window_left, int64_t window_right, float softmax_scale,
                               int64_t total_q, int64_t total_k, void* stream, char* error,
                               size_t error_size) {
  return attn_forward_split(kernel, dtype, q, k, v, out, lse, cu_seqlens_q, cu_seqlens_k, batch,
                            seqlen_q, seqlen_k, heads_q, heads_kv, head_dim, causal, window_left,
                            window_right, softmax_scale, total_q, total_k, /*num_splits=*/0,
                            /*workspace=*/nullptr, /*workspace_bytes=*/0, stream, error,
                            error_size);
}

extern "C" int attn_forward_split(const char* kernel, int dtype, const void* q, const void* k,
                                  const void* v, void* out, float* lse,
                                  const int32_t* cu_seqlens_q, const int32_t* cu_seqlens_k,
                                  int64_t batch, int64_t seqlen_q, int64_t seqlen_k,
                                  int64_t heads_q, int64_t heads_kv, int64_t head_dim,
                                  int causal, int64_t window_left, int64_t window_right,
                                  float softmax_scale, int64_t total_q, int64_t total_k,
                                  int num_splits, void* workspace, int64_t workspace_bytes,
                                  void* stream, char* error, size_t error_size) {
  RegisterLibraries();
  if (kernel == nullptr) {
    return ReportToC(absl::InvalidArgumentError("kernel is NULL"), error, error_size);
  }
  absl::StatusOr<attn::AttentionArgs> args =
      ExArgs(dtype, q, k, v, out, lse, cu_seqlens_q, cu_seqlens_k, batch, seqlen_q, seqlen_k,
             heads_q, heads_kv, head_dim, causal, window_left, window_right, softmax_scale,
             total_q, total_k);
  if (!args.ok()) return ReportToC(args.status(), error, error_size);
  args->num_splits = num_splits;
  args->workspace = workspace;
  args->workspace_bytes = workspace_bytes;
  return ReportToC(attn::Forward(*args, kernel, static_cast<CUstream_st*>(stream)), error,
                   error_size);
}

namespace {

// attn_forward_kvcache's problem (without the mask and scale).
absl::StatusOr<attn::AttentionProblem> KvCacheProblem(const attn_kv_cache_t* cache,
                                                      int64_t batch, int64_t seqlen_q,
                                                      int64_t heads_q, int64_t heads_kv,
                                                      int64_t head_dim, int64_t total_q,
                                                      bool varlen) {
  if (cache == nullptr) return absl::InvalidArgumentError("cache is NULL");
  attn::AttentionProblem problem;
  problem.batch = batch;
  problem.seqlen_q = seqlen_q;
  problem.heads_q = heads_q;
  problem.heads_kv = heads_kv;
  problem.head_dim = head_dim;
  problem.varlen = varlen;
  if (varlen) problem.total_q = total_q;
  problem.kv_cache = true;
  problem.append = cache->k_new != nullptr || cache->v_new != nullptr;
  problem.page_size = cache->block_table != nullptr ? cache->page_size : 0;
  if (problem.page_size > 0) {
    problem.num_pages = cache->num_pages;
    problem.max_pages_per_seq = cache->max_pages_per_seq;
    problem.seqlen_k = cache->max_pages_per_seq * cache->page_size;
  } else {
    problem.seqlen_k = cache->capacity;
  }
  return problem;
}

}  // namespace

extern "C" int attn_forward_kvcache(const char* kernel, int dtype, const void* q, void* out,
                                    float* lse, const int32_t* cu_seqlens_q,
                                    const attn_kv_cache_t* cache, int64_t batch,
                                    int64_t seqlen_q, int64_t heads_q, int64_t heads_kv,
                                    int64_t head_dim, int causal, int64_t window_left,
                                    int64_t window_right, float softmax_scale, int64_t total_q,
                                    int num_splits, void* workspace, int64_t workspace_bytes,
                                    void* stream, char* error, size_t error_size) {
  RegisterLibraries();
  if (kernel == nullptr) {
    return ReportToC(absl::InvalidArgumentError("kernel is NULL"), error, error_size);
  }
  absl::StatusOr<attn::DType> type = DTypeFromC(dtype);
  if (!type.ok()) return ReportToC(type.status(), error, error_size);
  absl::StatusOr<attn::AttentionProblem> problem = KvCacheProblem(
      cache, batch, seqlen_q, heads_q, heads_kv, head_dim, total_q, cu_seqlens_q != nullptr);
  if (!problem.ok()) return ReportToC(problem.status(), error, error_size);
  problem->causal = causal != 0;
  problem->window_left = window_left;
  problem->window_right = window_right;
  problem->softmax_scale = softmax_scale;
  problem->return_lse = lse != nullptr;
  if (cache->cache_seqlens_host != nullptr) {
    // Shape first, so the tables are read only within a valid shape.
    absl::StatusOr<attn::KernelInfo> info = attn::FindKernel(kernel);
    if (!info.ok()) return ReportToC(info.status(), error, error_size);
    absl::Status st = attn::ValidateProblem(*problem, *info);
    if (st.ok()) {
      st = attn::ValidateKvCache(*problem, cache->cache_seqlens_host, cache->block_table_host,
                                 cache->cu_seqlens_q_host);
    }
    if (!st.ok()) return ReportToC(st, error, error_size);
  }
  attn::AttentionArgs args = attn::AttentionArgs::Contiguous(*problem, *type, q, cache->k_cache,
                                                             cache->v_cache, out, lse);
  args.cu_seqlens_q = cu_seqlens_q;
  args.cache_seqlens = cache->cache_seqlens;
  args.block_table = cache->block_table;
  args.k_new = cache->k_new;
  args.v_new = cache->v_new;
  args.num_splits = num_splits;
  args.workspace = workspace;
  args.workspace_bytes = workspace_bytes;
  return ReportToC(attn::Forward(args, kernel, static_cast<CUstream_st*>(stream)), error,
                   error_size);
}

extern "C" int64_t attn_kvcache_workspace_bytes(const char* kernel, const attn_kv_cache_t* cache,
                                                int64_t batch, int64_t seqlen_q, int64_t heads_q,
                                                int64_t heads_kv, int64_t head_dim,
                                                int64_t total_q, int varlen, char* error,
                                                size_t error_size) {
  RegisterLibraries();
  if (kernel == nullptr) {
    ReportToC(absl::InvalidArgumentError("kernel is NULL"), error, error_size);
    return -1;
  }
  absl::StatusOr<attn::AttentionProblem> problem = KvCacheProblem(
      cache, batch, seqlen_q, heads_q, heads_kv, head_dim, total_q, varlen != 0);
  if (!problem.ok()) {
    ReportToC(problem.status(), error, error_size);
    return -1;
  }
  absl::StatusOr<attn::KernelHandle> handle = attn::ResolveKernel(kernel);
  if (!handle.ok()) {
    ReportToC(handle.status(), error, error_size);
    return -1;
  }
  return handle->WorkspaceBytes(*problem);
}

extern "C" int attn_kernel_caps(const char* kernel, attn_kernel_caps_t* caps) {
  RegisterLibraries();
  if (kernel == nullptr || caps == nullptr) {
    return static_cast<int>(absl::StatusCode::kInvalidArgument);
  }
  absl::StatusOr<attn::KernelInfo> info = attn::FindKernel(kernel);
  if (!info.ok()) return static_cast<int>(info.status().code());
  const attn::KernelCapabilities& c = info->caps;
  *caps = attn_kernel_caps_t{};
  caps->backend = info->backend == attn::Backend::kCuda ? 1 : 0;
  caps->ladder_step = info->ladder_step;
  const size_t max_dims = sizeof(caps->head_dims) / sizeof(caps->head_dims[0]);
  caps->num_head_dims = static_cast<int>(std::min(c.head_dims.size(), max_dims));
  for (int i = 0; i < caps->num_head_dims; ++i) caps->head_dims[i] = c.head_dims[i];
  caps->max_head_dim = c.head_dims.empty()
                           ? static_cast<int>(attn::kMaxCpuHeadDim)
                           : *std::max_element(c.head_dims.begin(), c.head_dims.end());
  caps->seq_multiple = c.seq_multiple;
  caps->causal = c.causal;
  caps->window = c.window;
  caps->gqa = c.gqa;
  caps->seqlen_q_ne_k = c.seqlen_q_ne_k;
  caps->lse = c.lse;
  caps->varlen = c.varlen;
  caps->strided = c.strided;
  caps->min_compute_capability = c.min_compute_capability;
  return 0;
}

extern "C" size_t attn_list_kernels(int include_candidates, char* buffer, size_t size) {
  RegisterLibraries();
  std::string names;
  for (const attn::KernelInfo& k : attn::ListKernels()) names += k.name + "\n";
  if (include_candidates != 0) {
    for (const attn::KernelInfo& k : attn::ListTuningCandidates()) names += k.name + "\n";
  }
  if (buffer != nullptr && size > 0) {
    const size_t n = std::min(names.size(), size - 1);
    std::memcpy(buffer, names.data(), n);
    buffer[n] = '\0';
  }
  return names.size() + 1;
}

extern "C" int attn_kernel_step(const char* kernel) {
  RegisterLibraries();
  if (kernel == nullptr) return -1;
  absl::StatusOr<attn::KernelInfo> info = attn::FindKernel(kernel);
  return info.ok() ? info->ladder_step : -1;
}
