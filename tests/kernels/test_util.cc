#include "test_util.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <random>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace attn::testing {
namespace {

// One generator and one distribution for Q, K and V in turn.
void FillNormal(size_t n, DType dtype, std::mt19937_64& rng,
                std::normal_distribution<float>& normal, std::vector<uint16_t>& bits,
                std::vector<float>& values) {
  bits.resize(n);
  values.resize(n);
  for (size_t i = 0; i < n; ++i) {
    bits[i] = FloatToBits(normal(rng), dtype);
    values[i] = BitsToFloat(bits[i], dtype);
  }
}

}  // namespace

uint64_t FreshSeed() {
  std::random_device device;
  return (static_cast<uint64_t>(device()) << 32) ^ device();
}

HostInputs MakeRandomInputs(const Shape& shape, DType dtype, uint64_t seed) {
  HostInputs in;
  in.shape = shape;
  in.dtype = dtype;
  in.seed = seed;
  const size_t n = static_cast<size_t>(shape.NumElements());
  std::mt19937_64 rng(seed);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  FillNormal(n, dtype, rng, normal, in.q, in.q_float);
  FillNormal(n, dtype, rng, normal, in.k, in.k_float);
  FillNormal(n, dtype, rng, normal, in.v, in.v_float);
  return in;
}

ProblemInputs MakeProblemInputs(const AttentionProblem& problem, DType dtype, uint64_t seed,
                                std::vector<int32_t> cu_seqlens_q,
                                std::vector<int32_t> cu_seqlens_k) {
  ProblemInputs in;
  in.problem = problem;
  in.dtype = dtype;
  in.seed = seed;
  if (problem.varlen) {
    in.cu_seqlens_q = std::move(cu_seqlens_q);
    in.cu_seqlens_k = std::move(cu_seqlens_k);
  }
  std::mt19937_64 rng(seed);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  FillNormal(static_cast<size_t>(problem.QElements()), dtype, rng, normal, in.q, in.q_float);
  FillNormal(static_cast<size_t>(problem.KVElements()), dtype, rng, normal, in.k, in.k_float);
  FillNormal(static_cast<size_t>(problem.KVElements()), dtype, rng, normal, in.v, in.v_float);
  return in;
}

void SetVarlen(AttentionProblem* problem, const std::vector<int32_t>& q_lens,
               const std::vector<int32_t>& k_lens, std::vector<int32_t>* cu_seqlens_q,
               std::vector<int32_t>* cu_seqlens_k) {
  problem->varlen = true;
  problem->batch = static_cast<int64_t>(q_lens.size());
  cu_seqlens_q->assign(1, 0);
  cu_seqlens_k->assign(1, 0);
  problem->seqlen_q = problem->seqlen_k = 1;
  for (size_t b = 0; b < q_lens.size(); ++b) {
    cu_seqlens_q->push_back(cu_seqlens_q->back() + q_lens[b]);
    cu_seqlens_k->push_back(cu_seqlens_k->back() + k_lens[b]);
    problem->seqlen_q = std::max<int64_t>(problem->seqlen_q, q_lens[b]);
    problem->seqlen_k = std::max<int64_t>(problem->seqlen_k, k_lens[b]);
  }
  problem->total_q = cu_seqlens_q->back();
  problem->total_k = cu_seqlens_k->back();
}

TensorLayout TensorLayout::Dense(int64_t batch, int64_t seq, int64_t heads, int64_t head_dim) {
  return {batch, seq, heads, head_dim, ContiguousStrides(seq, heads, head_dim)};
}

TensorLayout TensorLayout::Padded(int64_t batch, int64_t seq, int64_t heads, int64_t head_dim,
                                  int64_t pad) {
  TensorLayout l{batch, seq, heads, head_dim, {}};
  l.strides.head = head_dim + pad;
  l.strides.row = heads * l.strides.head + 2 * pad;
  l.strides.batch = seq * l.strides.row + 3 * pad;
  return l;
}

TensorLayout TensorLayout::ForQ(const AttentionProblem& p, int64_t pad) {
  const int64_t batch = p.varlen ? 1 : p.batch;
  const int64_t seq = p.varlen ? p.total_q : p.seqlen_q;
  return pad > 0 ? Padded(batch, seq, p.heads_q, p.head_dim, pad)
                 : Dense(batch, seq, p.heads_q, p.head_dim);
}

TensorLayout TensorLayout::ForKV(const AttentionProblem& p, int64_t pad) {
  const int64_t batch = p.varlen ? 1 : p.batch;
  const int64_t seq = p.varlen ? p.total_k : p.seqlen_k;
  return pad > 0 ? Padded(batch, seq, p.heads_kv, p.head_dim, pad)
                 : Dense(batch, seq, p.heads_kv, p.head_dim);
}

int64_t TensorLayout::Elements() const {
  if (batch == 0 || seq == 0 || heads == 0) return 0;
  return (batch - 1) * strides.batch + (seq - 1) * strides.row + (heads - 1) * strides.head +
         head_dim;
}

std::vector<uint16_t> TensorLayout::Scatter(const std::vector<uint16_t>& dense,
                                            uint16_t fill) const {
  std::vector<uint16_t> out(Elements(), fill);
  for (int64_t b = 0; b < batch; ++b)
    for (int64_t t = 0; t < seq; ++t)
      for (int64_t h = 0; h < heads; ++h)
        std::copy_n(&dense[((b * seq + t) * heads + h) * head_dim], head_dim, &out[At(b, t, h)]);
  return out;
}

std::vector<uint16_t> TensorLayout::Gather(const std::vector<uint16_t>& laid_out) const {
  std::vector<uint16_t> out(batch * seq * heads * head_dim);
  for (int64_t b = 0; b < batch; ++b)
    for (int64_t t = 0; t < seq; ++t)
      for (int64_t h = 0; h < heads; ++h)
        std::copy_n(&laid_out[At(b, t, h)], head_dim, &out[((b * seq + t) * heads + h) * head_dim]);
  return out;
}

int64_t TensorLayout::CountPaddingNot(const std::vector<uint16_t>& laid_out, uint16_t fill) const {
  std::vector<bool> used(laid_out.size(), false);
  for (int64_t b = 0; b < batch; ++b)
    for (int64_t t = 0; t < seq; ++t)
      for (int64_t h = 0; h < heads; ++h)
        for (int64_t c = 0; c < head_dim; ++c) used[At(b, t, h) + c] = true;
  int64_t count = 0;
  for (size_t i = 0; i < laid_out.size(); ++i) count += !used[i] && laid_out[i] != fill;
  return count;
}

double RelativeL2Error(const std::vector<uint16_t>& out, DType dtype,
                       const std::vector<double>& ref) {
  std::vector<float> values(out.size());
  for (size_t i = 0; i < out.size(); ++i) values[i] = BitsToFloat(out[i], dtype);
  return RelativeL2Error(values, ref);
}

double RelativeL2Error(const std::vector<float>& out, const std::vector<double>& ref) {
  if (out.size() != ref.size()) return std::numeric_limits<double>::infinity();
  double diff = 0.0, norm = 0.0;
  for (size_t i = 0; i < ref.size(); ++i) {
    const double d = static_cast<double>(out[i]) - ref[i];
    diff += d * d;
    norm += ref[i] * ref[i];
  }
  if (std::isnan(diff)) return std::numeric_limits<double>::infinity();
  return norm > 0.0 ? std::sqrt(diff) / std::sqrt(norm) : std::sqrt(diff);
}

int64_t CountNonFinite(const std::vector<uint16_t>& out, DType dtype) {
  int64_t count = 0;
  for (uint16_t bits : out) count += std::isfinite(BitsToFloat(bits, dtype)) ? 0 : 1;
  return count;
}

double MaxLseError(const std::vector<float>& lse, const std::vector<double>& ref) {
  constexpr double kInf = std::numeric_limits<double>::infinity();
  if (lse.size() != ref.size()) return kInf;
  double worst = 0.0;
  for (size_t i = 0; i < ref.size(); ++i) {
    if (std::isinf(ref[i])) {
      if (lse[i] != static_cast<float>(ref[i])) return kInf;
      continue;
    }
    if (!std::isfinite(lse[i])) return kInf;
    worst = std::max(worst, std::abs(static_cast<double>(lse[i]) - ref[i]));
  }
  return worst;
}

std::string Describe(const HostInputs& in) {
  return absl::StrCat("dtype=", DTypeName(in.dtype), " shape=", in.shape.ToString(),
                      " seed=", in.seed);
}

std::string Describe(const ProblemInputs& in) {
  std::string s = absl::StrCat("dtype=", DTypeName(in.dtype), " problem=", in.problem.ToString(),
                               " scale=", in.problem.softmax_scale, " seed=", in.seed);
  if (in.problem.varlen) {
    absl::StrAppend(&s, " cu_seqlens_q=[", absl::StrJoin(in.cu_seqlens_q, ","),
                    "] cu_seqlens_k=[", absl::StrJoin(in.cu_seqlens_k, ","), "]");
  }
  return s;
}

AttentionProblem DenseProblem(int64_t batch, int64_t seqlen_q, int64_t seqlen_k, int64_t heads_q,
                              int64_t heads_kv, int64_t head_dim, bool causal, bool lse) {
  AttentionProblem p;
  p.batch = batch;
  p.seqlen_q = seqlen_q;
  p.seqlen_k = seqlen_k;
  p.heads_q = heads_q;
  p.heads_kv = heads_kv;
  p.head_dim = head_dim;
  p.causal = causal;
  p.return_lse = lse;
  return p;
}

}  // namespace attn::testing
