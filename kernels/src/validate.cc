// ValidateArgs, ValidateProblem, ValidateCuSeqlens: every rule a kernel
// relies on, checked on the host before anything runs, in one place. Messages
// name the field and the rule it broke.
#include "attn/validate.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdint>
#include <initializer_list>
#include <limits>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "attn/attention.h"

namespace attn {
namespace {

// Grid dimensions y and z (heads and batch) are limited to 65535 by CUDA.
constexpr int64_t kMaxGridYZ = 65535;
// Any single dimension; keeps every element count and byte offset in int64.
constexpr int64_t kMaxDim = int64_t{1} << 31;
// Elements of any one tensor (Q/O or K/V).
constexpr int64_t kMaxElements = int64_t{1} << 40;
// The furthest element a strided tensor may reach (int64 offsets, in bytes too).
constexpr int64_t kMaxReach = int64_t{1} << 60;
// cu_seqlens are int32.
constexpr int64_t kMaxTotal = std::numeric_limits<int32_t>::max();
// GPU kernels load 16-byte chunks: pointers 16-byte aligned, strides whole chunks.
constexpr int64_t kGpuAlignBytes = 16;
constexpr int64_t kGpuStrideMultiple = 8;  // 16-bit elements per 16-byte chunk

absl::Status Invalid(std::string message) {
  return absl::InvalidArgumentError(std::move(message));
}

// True when the product of `factors` (each >= 1) exceeds `limit`.
bool ProductExceeds(std::initializer_list<int64_t> factors, int64_t limit) {
  int64_t product = 1;
  for (int64_t f : factors) {
    if (f > limit / product) return true;
    product *= f;
  }
  return product > limit;
}

// "seqlen_q" or "seqlen_k", "total_q" or "total_k" for a cu_seqlens field name.
std::string Suffixed(const char* stem, const char* field) {
  const std::string f(field);
  return absl::StrCat(stem, f.size() >= 2 && f.compare(f.size() - 2, 2, "_k") == 0 ? "_k" : "_q");
}

absl::Status CheckPointer(const char* name, const void* p, int64_t align, const char* why) {
  if (p == nullptr) return Invalid(absl::StrCat(name, " is null"));
  if (reinterpret_cast<uintptr_t>(p) % static_cast<uintptr_t>(align) != 0) {
    return Invalid(absl::StrFormat("%s (%p) must be %d-byte aligned%s", name, p, align, why));
  }
  return absl::OkStatus();
}

// One [batch, seq, heads, head_dim] tensor's strides. A stride over a
// dimension of size 1 is never used, so it is not checked.
struct StridedDim {
  const char* name;
  int64_t stride;
  int64_t size;
};

// `batch` is what the batch stride steps over (1: unused), `seq_len` the
// tensor's sequence length, `tokens` the rows its row stride steps over
// (seq_len, or the varlen total).
absl::Status CheckStrides(const char* name, const TensorStrides& s, int64_t batch,
                          int64_t seq_len, int64_t tokens, int64_t heads,
                          const AttentionProblem& p, const KernelInfo& kernel, bool is_output) {
  const bool gpu = kernel.backend == Backend::kCuda;
  const std::array<StridedDim, 3> dims = {{{"batch", s.batch, batch},
                                           {"row", s.row, tokens},
                                           {"head", s.head, heads}}};
  const TensorStrides dense = ContiguousStrides(seq_len, heads, p.head_dim);
  const std::array<int64_t, 3> dense_values = {dense.batch, dense.row, dense.head};
  bool contiguous = true;
  int64_t reach = p.head_dim;  // elements from the first to one past the last
  for (size_t i = 0; i < dims.size(); ++i) {
    const StridedDim& d = dims[i];
    if (d.size <= 1) continue;
    if (d.stride < 0 || d.stride > kMaxReach) {
      return Invalid(absl::StrFormat("%s.%s is %d; strides must be between 0 and 2^60", name,
                                     d.name, d.stride));
    }
    if (gpu && d.stride % kGpuStrideMultiple != 0) {
      return Invalid(absl::StrFormat(
          "%s.%s is %d; GPU kernels load 16-byte chunks, so strides must be multiples of %d "
          "elements",
          name, d.name, d.stride, kGpuStrideMultiple));
    }
    if (d.stride != dense_values[i]) contiguous = false;
    if (d.stride != 0 && d.size - 1 > (kMaxReach - reach) / d.stride) {
      return Invalid(absl::StrFormat("%s reach past element 2^60 (%s stride %d over %d)", name,
                                     d.name, d.stride, d.size));
    }
    reach += d.stride * (d.size - 1);
  }
  if (!contiguous && !kernel.caps.strided) {
    return Invalid(absl::StrFormat(
        "%s (batch %d, row %d, head %d) are not contiguous (batch %d, row %d, head %d); "
        "kernel '%s' takes only contiguous tensors",
        name, s.batch, s.row, s.head, dense.batch, dense.row, dense.head, kernel.name));
  }
  if (is_output) {
    // No two output elements may share an address: ordered by stride, each
    // dimension must step past everything the smaller ones span.
    std::array<StridedDim, 4> sorted = {
        {{"head_dim", 1, p.head_dim}, dims[0], dims[1], dims[2]}};
    std::sort(sorted.begin(), sorted.end(),
              [](const StridedDim& a, const StridedDim& b) { return a.stride < b.stride; });
    int64_t span = 0;  // furthest offset reached by the smaller dimensions
    for (const StridedDim& d : sorted) {
      if (d.size <= 1) continue;
      if (d.stride <= span) {
        return Invalid(absl::StrFormat(
            "%s (batch %d, row %d, head %d) make output elements overlap (%s stride %d within "
            "the %d elements the smaller strides span)",
            name, s.batch, s.row, s.head, d.name, d.stride, span + 1));
      }
      span += d.stride * (d.size - 1);
    }
  }
  return absl::OkStatus();
}

// The K/V cache's fields: set only with kv_cache; a paged cache's page
// size a power of two, its pools and block table within int32 indices, and
// seqlen_k its capacity.
absl::Status CheckKvCacheShape(const AttentionProblem& p) {
  if (!p.kv_cache) {
    if (p.append) return Invalid("append is set but kv_cache is not (append writes into a cache)");
    if (p.page_size != 0) {
      return Invalid(absl::StrFormat("page_size is %d but kv_cache is not set", p.page_size));
    }
    return absl::OkStatus();
  }
  if (p.page_size == 0) return absl::OkStatus();  // dense: [batch, seqlen_k, heads_kv, head_dim]
  if (p.page_size < 1 || p.page_size > kMaxPageSize || (p.page_size & (p.page_size - 1)) != 0) {
    return Invalid(absl::StrFormat(
        "page_size is %d; it must be a power of two between 1 and %d (0: a dense cache)",
        p.page_size, kMaxPageSize));
  }
  if (p.num_pages < 1 || p.num_pages > kMaxTotal) {
    return Invalid(absl::StrFormat(
        "num_pages is %d; a paged cache has between 1 and %d pages (block_table is int32)",
        p.num_pages, kMaxTotal));
  }
  if (p.max_pages_per_seq < 1 || p.max_pages_per_seq > kMaxTotal / p.page_size) {
    return Invalid(absl::StrFormat(
        "max_pages_per_seq is %d; it must be between 1 and %d at page_size %d", p.max_pages_per_seq,
        kMaxTotal / p.page_size, p.page_size));
  }
  if (p.seqlen_k != p.max_pages_per_seq * p.page_size) {
    return Invalid(absl::StrFormat(
        "seqlen_k is %d; a paged cache's is its capacity, max_pages_per_seq (%d) x page_size (%d) "
        "= %d",
        p.seqlen_k, p.max_pages_per_seq, p.page_size, p.max_pages_per_seq * p.page_size));
  }
  return absl::OkStatus();
}

}  // namespace

absl::Status ValidateProblem(const AttentionProblem& p, const KernelInfo& kernel) {
  const bool gpu = kernel.backend == Backend::kCuda;
  const KernelCapabilities& caps = kernel.caps;
  const struct {
    const char* name;
    int64_t value;
  } dims[] = {{"batch", p.batch},     {"seqlen_q", p.seqlen_q}, {"seqlen_k", p.seqlen_k},
              {"heads_q", p.heads_q}, {"heads_kv", p.heads_kv}, {"head_dim", p.head_dim}};
  for (const auto& dim : dims) {
    if (dim.value < 1 || dim.value > kMaxDim) {
      return Invalid(absl::StrFormat("%s is %d; it must be between 1 and %d", dim.name,
                                     dim.value, kMaxDim));
    }
  }
  if (p.heads_q % p.heads_kv != 0) {
    return Invalid(absl::StrFormat("heads_q (%d) must be a multiple of heads_kv (%d)", p.heads_q,
                                   p.heads_kv));
  }
  if (p.varlen) {
    for (const auto& total : {std::make_pair("total_q", p.total_q),
                              std::make_pair("total_k", p.total_k)}) {
      if (p.kv_cache && total.first[6] == 'k') continue;  // keys come from the cache
      if (total.second < 1 || total.second > kMaxTotal) {
        return Invalid(absl::StrFormat(
            "%s is %d; with varlen it must be between 1 and %d (cu_seqlens are int32)",
            total.first, total.second, kMaxTotal));
      }
    }
  }
  if (absl::Status st = CheckKvCacheShape(p); !st.ok()) return st;
  const int64_t q_tokens = p.QTokens();
  const int64_t kv_tokens = p.KVTokens();
  if (ProductExceeds({q_tokens, p.heads_q, p.head_dim}, kMaxElements) ||
      ProductExceeds({kv_tokens, p.heads_kv, p.head_dim}, kMaxElements)) {
    return Invalid(absl::StrFormat("problem %s has a tensor of more than %d elements",
                                   p.ToString(), kMaxElements));
  }
  if (!std::isfinite(p.softmax_scale) || p.softmax_scale < 0.0f) {
    return Invalid(absl::StrFormat(
        "softmax_scale is %g; it must be finite and >= 0 (0 means 1/sqrt(head_dim))",
        p.softmax_scale));
  }
  for (const auto& w : {std::make_pair("window_left", p.window_left),
                        std::make_pair("window_right", p.window_right)}) {
    if (w.second < -1) {
      return Invalid(
          absl::StrFormat("%s is %d; it must be >= -1 (-1: unbounded)", w.first, w.second));
    }
  }

  // What the kernel can do.
  if (!caps.head_dims.empty()) {
    if (std::find(caps.head_dims.begin(), caps.head_dims.end(), p.head_dim) ==
        caps.head_dims.end()) {
      return Invalid(absl::StrFormat("head_dim is %d; kernel '%s' supports %s", p.head_dim,
                                     kernel.name, absl::StrJoin(caps.head_dims, ", ")));
    }
  } else if (p.head_dim > kMaxCpuHeadDim) {
    return Invalid(absl::StrFormat("head_dim is %d; kernel '%s' supports head_dim up to %d",
                                   p.head_dim, kernel.name, kMaxCpuHeadDim));
  }
  if (p.causal && !caps.causal) {
    return Invalid(absl::StrFormat("causal is set; kernel '%s' has no causal mask", kernel.name));
  }
  if (!caps.window) {
    for (const auto& w : {std::make_pair("window_left", p.window_left),
                          std::make_pair("window_right", p.window_right)}) {
      if (w.second >= 0) {
        return Invalid(absl::StrFormat("%s is %d; kernel '%s' has no sliding window", w.first,
                                       w.second, kernel.name));
      }
    }
  }
  if (p.heads_kv != p.heads_q && !caps.gqa) {
    return Invalid(absl::StrFormat(
        "heads_kv (%d) differs from heads_q (%d); kernel '%s' has no grouped-query attention",
        p.heads_kv, p.heads_q, kernel.name));
  }
  if (p.seqlen_q != p.seqlen_k && !caps.seqlen_q_ne_k) {
    return Invalid(absl::StrFormat(
        "seqlen_q (%d) differs from seqlen_k (%d); kernel '%s' needs equal lengths", p.seqlen_q,
        p.seqlen_k, kernel.name));
  }
  if (p.return_lse && !caps.lse) {
    return Invalid(
        absl::StrFormat("return_lse is set; kernel '%s' has no LSE output", kernel.name));
  }
  if (p.kv_cache && !caps.kv_cache) {
    return Invalid(absl::StrFormat("kv_cache is set; kernel '%s' has no K/V cache", kernel.name));
  }
  if (p.varlen && !caps.varlen) {
    return Invalid(absl::StrFormat(
        "varlen is set; kernel '%s' has no packed sequences (cu_seqlens)", kernel.name));
  }
  if (caps.seq_multiple > 1) {
    for (const auto& len : {std::make_pair("seqlen_q", p.seqlen_q),
                            std::make_pair("seqlen_k", p.seqlen_k)}) {
      if (len.second % caps.seq_multiple != 0) {
        return Invalid(absl::StrFormat("%s is %d; kernel '%s' needs a multiple of %d",
                                       len.first, len.second, kernel.name, caps.seq_multiple));
      }
    }
  }
  if (gpu && (p.batch > kMaxGridYZ || p.heads_q > kMaxGridYZ)) {
    return Invalid(absl::StrFormat(
        "batch (%d) and heads_q (%d) must each be at most %d on GPU kernels", p.batch,
        p.heads_q, kMaxGridYZ));
  }
  return absl::OkStatus();
}

absl::Status ValidateCuSeqlens(const int32_t* host, int64_t batch, int64_t total,
                               int64_t max_len, const char* field) {
  if (host == nullptr) return Invalid(absl::StrCat(field, " must be given with varlen"));
  if (host[0] != 0) {
    return Invalid(absl::StrFormat("%s[0] is %d; it must be 0", field, host[0]));
  }
  for (int64_t b = 0; b < batch; ++b) {
    const int64_t len = static_cast<int64_t>(host[b + 1]) - host[b];
    if (len < 0) {
      return Invalid(absl::StrFormat(
          "%s[%d] (%d) is less than %s[%d] (%d); offsets must be non-decreasing", field, b + 1,
          host[b + 1], field, b, host[b]));
    }
    if (len > max_len) {
      return Invalid(absl::StrFormat(
          "%s: sequence %d has %d tokens (%s[%d] - %s[%d]), more than %s (%d)", field, b, len,
          field, b + 1, field, b, Suffixed("seqlen", field), max_len));
    }
  }
  if (host[batch] != total) {
    return Invalid(absl::StrFormat("%s[%d] (the last) is %d; it must equal %s (%d)", field,
                                   batch, host[batch], Suffixed("total", field), total));
  }
  return absl::OkStatus();
}

absl::Status ValidateArgs(const AttentionArgs& args, const KernelInfo& kernel) {
  const AttentionProblem& p = args.problem;
  if (absl::Status st = ValidateProblem(p, kernel); !st.ok()) return st;
  const bool gpu = kernel.backend == Backend::kCuda;

  if (args.dtype != DType::kFloat16 && args.dtype != DType::kBFloat16) {
    return Invalid(absl::StrFormat("dtype is %d; it must be fp16 (%d) or bf16 (%d)",
                                   static_cast<int>(args.dtype),
                                   static_cast<int>(DType::kFloat16),
                                   static_cast<int>(DType::kBFloat16)));
  }
  const int64_t align = gpu ? kGpuAlignBytes : static_cast<int64_t>(DTypeSize(args.dtype));
  const char* why = gpu ? " for GPU kernels" : "";
  for (const auto& t : {std::make_pair("q", args.q), std::make_pair("k", args.k),
                        std::make_pair("v", args.v),
                        std::make_pair("out", static_cast<const void*>(args.out))}) {
    if (absl::Status st = CheckPointer(t.first, t.second, align, why); !st.ok()) return st;
  }
  if (p.return_lse) {
    if (args.lse == nullptr) return Invalid("lse is null but return_lse is set");
    if (absl::Status st = CheckPointer("lse", args.lse, 4, ""); !st.ok()) return st;
  }
  if (p.varlen) {
    for (const auto& cu : {std::make_pair("cu_seqlens_q", args.cu_seqlens_q),
                           std::make_pair("cu_seqlens_k", args.cu_seqlens_k)}) {
      if (cu.first[11] == 'k' && !p.VarlenKeys()) continue;  // a cache's keys are not packed
      if (cu.second == nullptr) return Invalid(absl::StrCat(cu.first, " must be given with varlen"));
      if (absl::Status st = CheckPointer(cu.first, cu.second, 4, ""); !st.ok()) return st;
    }
  }

  if (p.kv_cache) {
    if (absl::Status st = CheckPointer("cache_seqlens", args.cache_seqlens, 4, " (kv_cache)");
        !st.ok()) {
      return st;
    }
    if (p.Paged()) {
      if (absl::Status st = CheckPointer("block_table", args.block_table, 4, " (paged)"); !st.ok()) {
        return st;
      }
    }
    if (p.append) {
      for (const auto& t : {std::make_pair("k_new", args.k_new), std::make_pair("v_new", args.v_new)}) {
        if (absl::Status st = CheckPointer(t.first, t.second, align, why); !st.ok()) return st;
      }
    }
  }

  // Each tensor as [batch, seq_len, heads, head_dim]: the batch its batch
  // stride steps over (none with packed tokens; a paged cache's pages) and
  // the tokens its row stride steps over.
  const int64_t q_batch = p.varlen ? 1 : p.batch;
  const int64_t q_rows = p.varlen ? p.QTokens() : p.seqlen_q;
  int64_t kv_batch = p.batch, kv_seq = p.seqlen_k, kv_rows = p.seqlen_k;
  if (p.Paged()) {
    kv_batch = p.num_pages;
    kv_seq = kv_rows = p.page_size;
  } else if (p.VarlenKeys()) {
    kv_batch = 1;
    kv_rows = p.total_k;
  }
  struct StridedTensor {
    const char* name;
    const TensorStrides& strides;
    int64_t batch, seq_len, rows, heads;
    bool is_output;
  };
  std::vector<StridedTensor> tensors = {
      {"q_strides", args.q_strides, q_batch, p.seqlen_q, q_rows, p.heads_q, false},
      {"k_strides", args.k_strides, kv_batch, kv_seq, kv_rows, p.heads_kv, false},
      {"v_strides", args.v_strides, kv_batch, kv_seq, kv_rows, p.heads_kv, false},
      {"out_strides", args.out_strides, q_batch, p.seqlen_q, q_rows, p.heads_q, true},
  };
  if (p.kv_cache && p.append) {
    tensors.push_back({"k_new_strides", args.k_new_strides, q_batch, p.seqlen_q, q_rows,
                       p.heads_kv, false});
    tensors.push_back({"v_new_strides", args.v_new_strides, q_batch, p.seqlen_q, q_rows,
                       p.heads_kv, false});
  }
  for (const StridedTensor& t : tensors) {
    if (absl::Status st = CheckStrides(t.name, t.strides, t.batch, t.seq_len, t.rows, t.heads, p,
                                       kernel, t.is_output);
        !st.ok()) {
      return st;
    }
  }

  // GPU kernels step through K and V tiles with one row stride.
  if (gpu && kv_rows > 1 && args.k_strides.row != args.v_strides.row) {
    return Invalid(absl::StrFormat(
        "v_strides.row (%d) differs from k_strides.row (%d); GPU kernels need K and V rows the "
        "same distance apart",
        args.v_strides.row, args.k_strides.row));
  }

  // Host offsets (the CPU kernel) can be read here; device ones cannot.
  if (p.varlen && !gpu) {
    if (absl::Status st =
            ValidateCuSeqlens(args.cu_seqlens_q, p.batch, p.total_q, p.seqlen_q, "cu_seqlens_q");
        !st.ok()) {
      return st;
    }
    if (p.VarlenKeys()) {
      if (absl::Status st = ValidateCuSeqlens(args.cu_seqlens_k, p.batch, p.total_k, p.seqlen_k,
                                              "cu_seqlens_k");
          !st.ok()) {
        return st;
      }
    }
  }
  if (p.kv_cache && !gpu) {
    return ValidateKvCache(p, args.cache_seqlens, args.block_table, args.cu_seqlens_q);
  }
  return absl::OkStatus();
}

absl::Status ValidateKvCache(const AttentionProblem& p, const int32_t* cache_seqlens,
                             const int32_t* block_table, const int32_t* cu_seqlens_q) {
  if (cache_seqlens == nullptr) return Invalid("cache_seqlens must be given with kv_cache");
  if (p.Paged() && block_table == nullptr) return Invalid("block_table must be given when paged");
  if (p.append && p.varlen && cu_seqlens_q == nullptr) {
    return Invalid("cu_seqlens_q must be given with varlen (it splits the appended tokens)");
  }
  for (int64_t b = 0; b < p.batch; ++b) {
    const int64_t cached = cache_seqlens[b];
    const int64_t added =
        !p.append ? 0 : (p.varlen ? int64_t{cu_seqlens_q[b + 1]} - cu_seqlens_q[b] : p.seqlen_q);
    if (cached < 0) {
      return Invalid(absl::StrFormat("cache_seqlens[%d] is %d; it must be >= 0", b, cached));
    }
    if (cached + added > p.seqlen_k) {
      return Invalid(absl::StrFormat(
          "cache_seqlens[%d] is %d%s; the cache holds at most %d tokens per sequence%s", b, cached,
          added > 0 ? absl::StrFormat(" (+ %d appended)", added) : "", p.seqlen_k,
          p.Paged() ? absl::StrFormat(" (max_pages_per_seq %d x page_size %d)",
                                      p.max_pages_per_seq, p.page_size)
                    : ""));
    }
    if (!p.Paged()) continue;
    // The pages the sequence uses; entries past them are never read.
    const int64_t pages = (cached + added + p.page_size - 1) / p.page_size;
    for (int64_t i = 0; i < pages; ++i) {
      const int64_t page = block_table[b * p.max_pages_per_seq + i];
      if (page < 0 || page >= p.num_pages) {
        return Invalid(absl::StrFormat(
            "block_table[%d][%d] is %d; the pages sequence %d uses (%d tokens) must be in "
            "[0, num_pages = %d)",
            b, i, page, b, cached + added, p.num_pages));
      }
    }
  }
  return absl::OkStatus();
}

absl::Status ValidateWorkspace(const AttentionArgs& args, const KernelInfo& kernel) {
  if (args.num_splits < 0 || args.num_splits > kMaxSplits) {
    return Invalid(absl::StrFormat("num_splits is %d; it must be in [0, %d] (0: the kernel's choice)",
                                   args.num_splits, kMaxSplits));
  }
  if (args.workspace_bytes < 0) {
    return Invalid(absl::StrFormat("workspace_bytes is %d; it must be >= 0", args.workspace_bytes));
  }
  if (args.workspace != nullptr) {
    if (absl::Status st = CheckPointer("workspace", args.workspace, kGpuAlignBytes, ""); !st.ok()) {
      return st;
    }
  }
  const int64_t needed = SplitKvWorkspaceBytes(args.problem, args.num_splits);
  const int64_t given = args.workspace == nullptr ? 0 : args.workspace_bytes;
  if (given < needed) {
    return Invalid(absl::StrFormat(
        "workspace_bytes is %d%s; num_splits = %d needs %d bytes of workspace for %s (kernel '%s')",
        given, args.workspace == nullptr ? " (workspace is null)" : "", args.num_splits, needed,
        args.problem.ToString(), kernel.name));
  }
  return absl::OkStatus();
}

}  // namespace attn
