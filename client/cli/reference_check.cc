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

// Sums of one (batch, head) slice, combined after all threads finish.
struct SliceSums {
  double diff_squared = 0.0;
  double ref_squared = 0.0;
  double max_abs = 0.0;
  int64_t non_finite = 0;
};

// Copies head `h` of batch `b` out of a [B, S, H, D] 16-bit tensor as float.
void GatherHead(const std::string& tensor, DType dtype, const Shape& shape, int64_t b, int64_t h,
                std::vector<float>* out) {
  const int64_t S = shape.seq_len, H = shape.num_heads, D = shape.head_dim;
  out->resize(static_cast<size_t>(S * D));
  const auto* bits = reinterpret_cast<const uint16_t*>(tensor.data());
  for (int64_t s = 0; s < S; ++s) {
    const uint16_t* row = bits + ((b * S + s) * H + h) * D;
    ToFloat(row, dtype, static_cast<size_t>(D), out->data() + s * D);
  }
}

// The float64 reference output of query row `i` of one head (q, k, v are
// that head's [S, D] slices), written to `row`.
void ReferenceRow(const std::vector<float>& q, const std::vector<float>& k,
                  const std::vector<float>& v, int64_t seq_len, int64_t head_dim, int64_t i,
                  double scale, std::vector<double>* scores, std::vector<double>* row) {
  double max_score = -std::numeric_limits<double>::infinity();
  for (int64_t j = 0; j < seq_len; ++j) {
    double dot = 0.0;
    for (int64_t c = 0; c < head_dim; ++c) {
      dot += static_cast<double>(q[i * head_dim + c]) * k[j * head_dim + c];
    }
    (*scores)[j] = dot * scale;
    max_score = std::max(max_score, (*scores)[j]);
  }
  double sum = 0.0;
  for (int64_t j = 0; j < seq_len; ++j) sum += ((*scores)[j] = std::exp((*scores)[j] - max_score));
  row->assign(static_cast<size_t>(head_dim), 0.0);
  for (int64_t j = 0; j < seq_len; ++j) {
    const double p = (*scores)[j] / sum;
    for (int64_t c = 0; c < head_dim; ++c) (*row)[c] += p * v[j * head_dim + c];
  }
}

}  // namespace

CheckResult CheckAgainstReference(const AttentionInputs& inputs, float softmax_scale,
                                  const std::string& out, int threads, int64_t rows_per_head) {
  const Shape& shape = inputs.shape;
  const int64_t slices = shape.batch * shape.num_heads;
  const double scale = softmax_scale > 0.0f
                           ? static_cast<double>(softmax_scale)
                           : 1.0 / std::sqrt(static_cast<double>(shape.head_dim));
  std::vector<SliceSums> sums(static_cast<size_t>(slices));
  std::atomic<int64_t> next{0};
  auto worker = [&] {
    std::vector<float> q, k, v, o;
    std::vector<double> scores(static_cast<size_t>(shape.seq_len)), ref_row;
    const Shape head_shape{1, shape.seq_len, 1, shape.head_dim};
    for (int64_t i = next++; i < slices; i = next++) {
      const int64_t b = i / shape.num_heads, h = i % shape.num_heads;
      GatherHead(inputs.q, inputs.dtype, shape, b, h, &q);
      GatherHead(inputs.k, inputs.dtype, shape, b, h, &k);
      GatherHead(inputs.v, inputs.dtype, shape, b, h, &v);
      GatherHead(out, inputs.dtype, shape, b, h, &o);
      SliceSums& s = sums[static_cast<size_t>(i)];
      auto compare = [&s](double got, double want) {
        if (!std::isfinite(got)) {
          ++s.non_finite;
          return;
        }
        const double d = got - want;
        s.diff_squared += d * d;
        s.ref_squared += want * want;
        s.max_abs = std::max(s.max_abs, std::abs(d));
      };
      if (rows_per_head <= 0 || rows_per_head >= shape.seq_len) {
        const std::vector<double> ref =
            AttentionNaiveF64(q.data(), k.data(), v.data(), head_shape, scale);
        for (size_t j = 0; j < ref.size(); ++j) compare(o[j], ref[j]);
        continue;
      }
      const int64_t S = shape.seq_len, D = shape.head_dim;
      for (int64_t r = 0; r < rows_per_head; ++r) {
        const int64_t row = rows_per_head == 1 ? 0 : r * (S - 1) / (rows_per_head - 1);
        ReferenceRow(q, k, v, S, D, row, scale, &scores, &ref_row);
        for (int64_t c = 0; c < D; ++c) compare(o[row * D + c], ref_row[c]);
      }
    }
  };
  int n = threads > 0 ? threads : static_cast<int>(std::thread::hardware_concurrency());
  n = static_cast<int>(std::clamp<int64_t>(n, 1, slices));
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
  }
  CheckResult result;
  result.relative_l2_error =
      total.ref_squared > 0.0 ? std::sqrt(total.diff_squared / total.ref_squared) : 0.0;
  result.max_abs_error = total.max_abs;
  result.non_finite = total.non_finite;
  return result;
}

}  // namespace attn::cli
