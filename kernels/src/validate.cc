// ValidateArgs: every rule a kernel relies on, checked on the host before
// anything runs. Messages name the field and the rule it broke.
#include <cmath>
#include <cstdint>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "attn/attention.h"

namespace attn {
namespace {

// Grid dimensions y and z (heads and batch) are limited to 65535 by CUDA.
constexpr int64_t kMaxGridYZ = 65535;
// Any single dimension; keeps every element count and byte offset in int64.
constexpr int64_t kMaxDim = int64_t{1} << 31;
constexpr int64_t kMaxElements = int64_t{1} << 40;

absl::Status CheckTensor(const char* name, const ConstTensorView& t, const ConstTensorView& q,
                         bool gpu) {
  if (t.data == nullptr) return absl::InvalidArgumentError(absl::StrCat(name, ".data is null"));
  if (gpu && reinterpret_cast<uintptr_t>(t.data) % 16 != 0) {
    return absl::InvalidArgumentError(
        absl::StrCat(name, ".data must be 16-byte aligned for GPU kernels"));
  }
  if (t.dtype != q.dtype) {
    return absl::InvalidArgumentError(absl::StrCat(name, ".dtype (", DTypeName(t.dtype),
                                                   ") differs from q.dtype (",
                                                   DTypeName(q.dtype), ")"));
  }
  if (t.shape != q.shape) {
    return absl::InvalidArgumentError(absl::StrCat(name, ".shape ", t.shape.ToString(),
                                                   " differs from q.shape ",
                                                   q.shape.ToString()));
  }
  return absl::OkStatus();
}

}  // namespace

absl::Status ValidateArgs(const AttentionArgs& args, const KernelInfo& kernel) {
  const bool gpu = kernel.backend == Backend::kCuda;
  const Shape& s = args.q.shape;
  for (const Shape::NamedDim& dim : s.NamedDims()) {
    if (dim.value < 1 || dim.value > kMaxDim) {
      return absl::InvalidArgumentError(absl::StrFormat(
          "shape.%s is %d; it must be between 1 and %d", dim.name, dim.value, kMaxDim));
    }
  }
  if (s.batch * s.seq_len > kMaxElements / (s.num_heads * s.head_dim)) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "shape %s has more than %d elements", s.ToString(), kMaxElements));
  }
  if (absl::Status st = CheckTensor("q", args.q, args.q, gpu); !st.ok()) return st;
  if (absl::Status st = CheckTensor("k", args.k, args.q, gpu); !st.ok()) return st;
  if (absl::Status st = CheckTensor("v", args.v, args.q, gpu); !st.ok()) return st;
  if (absl::Status st = CheckTensor("out", args.out, args.q, gpu); !st.ok()) return st;

  if (kernel.head_dim != 0 && s.head_dim != kernel.head_dim) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "shape.head_dim is %d; kernel '%s' supports only head_dim %d", s.head_dim,
        kernel.name, kernel.head_dim));
  }
  if (kernel.head_dim == 0 && s.head_dim > kMaxCpuHeadDim) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "shape.head_dim is %d; kernel '%s' supports head_dim up to %d", s.head_dim,
        kernel.name, kMaxCpuHeadDim));
  }
  if (s.seq_len % kernel.seq_multiple != 0) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "shape.seq_len is %d; kernel '%s' needs a multiple of %d (its block size)", s.seq_len,
        kernel.name, kernel.seq_multiple));
  }
  if (gpu && (s.batch > kMaxGridYZ || s.num_heads > kMaxGridYZ)) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "shape.batch (%d) and shape.num_heads (%d) must each be at most %d on GPU kernels",
        s.batch, s.num_heads, kMaxGridYZ));
  }
  if (!std::isfinite(args.softmax_scale) || args.softmax_scale < 0.0f) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "softmax_scale is %g; it must be finite and > 0 (or 0 for 1/sqrt(head_dim))",
        args.softmax_scale));
  }
  return absl::OkStatus();
}

}  // namespace attn
