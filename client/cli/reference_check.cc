#include "reference_check.h"

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstring>
#include <limits>
#include <thread>
#include <vector>

#include "attn/cpu_reference.h"

namespace attn::cli {
namespace {

// Sums of one (sequence, head) slice, combined after all threads finish.
struct SliceSums {
  double diff_squared = 0.0;
  double ref_squared = 0.0;
  double max_abs = 0.0;
  int64_t non_finite = 0;
  double lse_max_abs = 0.0;
  int64_t lse_mismatched = 0;
  int64_t rows = 0;
};

// Where sequence b's tokens start and how many there are.
struct Span {
  int64_t start = 0;
  int64_t length = 0;
};

Span SequenceSpan(const std::vector<int32_t>& cu_seqlens, int64_t fixed_length, int64_t b) {
  if (!cu_seqlens.empty()) return {cu_seqlens[b], int64_t{cu_seqlens[b + 1]} - cu_seqlens[b]};
  return {b * fixed_length, fixed_length};
}

// Copies head `h` of the tokens `span` out of a [tokens, heads, D] 16-bit
// tensor as float ([span.length, D]).
void GatherHead(const std::string& tensor, DType dtype, int64_t heads, int64_t head_dim, Span span,
                int64_t h, std::vector<float>* out) {
  out->resize(static_cast<size_t>(span.length * head_dim));
  const auto* bits = reinterpret_cast<const uint16_t*>(tensor.data());
  for (int64_t s = 0; s < span.length; ++s) {
    const uint16_t* row = bits + ((span.start + s) * heads + h) * head_dim;
    ToFloat(row, dtype, static_cast<size_t>(head_dim), out->data() + s * head_dim);
  }
}

// The float64 reference output and LSE of query row `i` of one slice (q, k,
// v are that slice's [Sq, D] and [Skv, D] rows), with the window
// [lo(i), hi(i)] of FA2's bottom-right aligned masks.
void ReferenceRow(const std::vector<float>& q, const std::vector<float>& k,
                  const std::vector<float>& v, int64_t sq, int64_t sk, int64_t head_dim, int64_t i,
                  double scale, int64_t window_left, int64_t window_right,
                  std::vector<double>* scores, std::vector<double>* row, double* lse) {
  const int64_t diagonal = i + sk - sq;
  const int64_t lo = window_left >= 0 ? std::max<int64_t>(0, diagonal - window_left) : 0;
  const int64_t hi = window_right >= 0 ? std::min(sk - 1, diagonal + window_right) : sk - 1;
  row->assign(static_cast<size_t>(head_dim), 0.0);
  *lse = -std::numeric_limits<double>::infinity();
  if (hi < lo) return;  // sees no key: output 0, LSE -inf
  double max_score = -std::numeric_limits<double>::infinity();
  for (int64_t j = lo; j <= hi; ++j) {
    double dot = 0.0;
    for (int64_t c = 0; c < head_dim; ++c) {
      dot += static_cast<double>(q[i * head_dim + c]) * k[j * head_dim + c];
    }
    (*scores)[j] = dot * scale;
    max_score = std::max(max_score, (*scores)[j]);
  }
  double sum = 0.0;
  for (int64_t j = lo; j <= hi; ++j) sum += ((*scores)[j] = std::exp((*scores)[j] - max_score));
  for (int64_t j = lo; j <= hi; ++j) {
    const double p = (*scores)[j] / sum;
    for (int64_t c = 0; c < head_dim; ++c) (*row)[c] += p * v[j * head_dim + c];
  }
  *lse = max_score + std::log(sum);
}

}  // namespace

CheckResult CheckAgainstReference(const AttentionInputs& inputs, const AttendOptions& options,
                                  const std::string& out, const std::vector<float>& lse,
                                  int threads, int64_t rows_per_head) {
  const Shape& shape = inputs.shape;
  const int64_t heads = shape.num_heads, heads_kv = inputs.NumHeadsKv(), D = shape.head_dim;
  const int64_t group = heads / heads_kv;
  const int64_t slices = shape.batch * heads;
  const AttentionProblem problem = inputs.Problem(options);
  const double scale = problem.ResolvedScale();
  const int64_t window_left = problem.window_left;
  const int64_t window_right = problem.EffectiveWindowRight();
  const bool check_lse = !lse.empty();
  const int64_t total_q = inputs.TokensQ();

  std::vector<SliceSums> sums(static_cast<size_t>(slices));
  std::atomic<int64_t> next{0};
  auto worker = [&] {
    std::vector<float> q, k, v, o;
    std::vector<double> scores(static_cast<size_t>(inputs.SeqLenKv()) + 1), ref_row, ref_lse;
    for (int64_t i = next++; i < slices; i = next++) {
      const int64_t b = i / heads, h = i % heads;
      const Span sq = SequenceSpan(inputs.cu_seqlens_q, shape.seq_len, b);
      const Span sk = SequenceSpan(inputs.cu_seqlens_k, inputs.SeqLenKv(), b);
      if (sk.length + 1 > static_cast<int64_t>(scores.size())) scores.resize(sk.length + 1);
      GatherHead(inputs.q, inputs.dtype, heads, D, sq, h, &q);
      GatherHead(inputs.k, inputs.dtype, heads_kv, D, sk, h / group, &k);
      GatherHead(inputs.v, inputs.dtype, heads_kv, D, sk, h / group, &v);
      GatherHead(out, inputs.dtype, heads, D, sq, h, &o);
      SliceSums& s = sums[static_cast<size_t>(i)];
      // LSE of row r of this slice: [batch, heads, seq_len], varlen [heads, total_q].
      auto lse_at = [&](int64_t r) -> double {
        return inputs.varlen() ? lse[static_cast<size_t>(h * total_q + sq.start + r)]
                               : lse[static_cast<size_t>((b * heads + h) * shape.seq_len + r)];
      };
      auto compare_row = [&](int64_t r, const double* want, double want_lse) {
        ++s.rows;
        for (int64_t c = 0; c < D; ++c) {
          const double got = o[r * D + c];
          if (!std::isfinite(got)) {
            ++s.non_finite;
            continue;
          }
          const double d = got - want[c];
          s.diff_squared += d * d;
          s.ref_squared += want[c] * want[c];
          s.max_abs = std::max(s.max_abs, std::abs(d));
        }
        if (!check_lse) return;
        const double got_lse = lse_at(r);
        if (std::isinf(want_lse) || std::isinf(got_lse) || std::isnan(got_lse)) {
          if (got_lse != want_lse) ++s.lse_mismatched;
          return;
        }
        s.lse_max_abs = std::max(s.lse_max_abs, std::abs(got_lse - want_lse));
      };
      if (sq.length == 0) continue;
      if (rows_per_head <= 0 || rows_per_head >= sq.length) {
        // The whole slice through the kernel library's float64 reference.
        AttentionProblem slice = problem;
        slice.batch = 1;
        slice.heads_q = slice.heads_kv = 1;
        slice.seqlen_q = sq.length;
        slice.seqlen_k = sk.length;
        slice.varlen = false;
        slice.total_q = slice.total_k = 0;
        slice.softmax_scale = static_cast<float>(scale);
        const std::vector<double> ref =
            AttentionNaiveF64(slice, q.data(), k.data(), v.data(), nullptr, nullptr, &ref_lse);
        for (int64_t r = 0; r < sq.length; ++r) compare_row(r, ref.data() + r * D, ref_lse[r]);
        continue;
      }
      for (int64_t n = 0; n < rows_per_head; ++n) {
        const int64_t r = rows_per_head == 1 ? 0 : n * (sq.length - 1) / (rows_per_head - 1);
        double row_lse;
        ReferenceRow(q, k, v, sq.length, sk.length, D, r, scale, window_left, window_right, &scores,
                     &ref_row, &row_lse);
        compare_row(r, ref_row.data(), row_lse);
      }
    }
  };
  int n = threads > 0 ? threads : static_cast<int>(std::thread::hardware_concurrency());
  n = static_cast<int>(std::clamp<int64_t>(n, 1, std::max<int64_t>(slices, 1)));
  std::vector<std::thread> pool;
  for (int t = 1; t < n; ++t) pool.emplace_back(worker);
  worker();
  for (std::thread& t : pool) t.join();

  SliceSums total;
  for (const SliceSums& s : sums) {
    total.diff_squared += s.diff_squared;
    total.ref_squared += s.ref_squared;
    total.max_abs = std::max(total.max_abs, s.max_abs);
    total.non_finite += s.non_finite;
    total.lse_max_abs = std::max(total.lse_max_abs, s.lse_max_abs);
    total.lse_mismatched += s.lse_mismatched;
    total.rows += s.rows;
  }
  CheckResult result;
  result.relative_l2_error = total.ref_squared > 0.0
                                 ? std::sqrt(total.diff_squared / total.ref_squared)
                             : total.diff_squared > 0.0 ? std::numeric_limits<double>::infinity()
                                                        : 0.0;
  result.max_abs_error = total.max_abs;
  result.non_finite = total.non_finite;
  result.lse_checked = check_lse;
  result.lse_max_abs_error = total.lse_max_abs;
  result.lse_mismatched_empty_rows = total.lse_mismatched;
  result.rows_checked = total.rows;
  result.rows_total = total_q * heads;
  return result;
}

}  // namespace attn::cli
