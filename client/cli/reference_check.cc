#include "reference_check.h"

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstring>
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

}  // namespace

CheckResult CheckAgainstReference(const AttentionInputs& inputs, float softmax_scale,
                                  const std::string& out, int threads) {
  const Shape& shape = inputs.shape;
  const int64_t slices = shape.batch * shape.num_heads;
  const double scale = softmax_scale > 0.0f
                           ? static_cast<double>(softmax_scale)
                           : 1.0 / std::sqrt(static_cast<double>(shape.head_dim));
  std::vector<SliceSums> sums(static_cast<size_t>(slices));
  std::atomic<int64_t> next{0};
  auto worker = [&] {
    std::vector<float> q, k, v, o;
    const Shape head_shape{1, shape.seq_len, 1, shape.head_dim};
    for (int64_t i = next++; i < slices; i = next++) {
      const int64_t b = i / shape.num_heads, h = i % shape.num_heads;
      GatherHead(inputs.q, inputs.dtype, shape, b, h, &q);
      GatherHead(inputs.k, inputs.dtype, shape, b, h, &k);
      GatherHead(inputs.v, inputs.dtype, shape, b, h, &v);
      GatherHead(out, inputs.dtype, shape, b, h, &o);
      const std::vector<double> ref =
          AttentionNaiveF64(q.data(), k.data(), v.data(), head_shape, scale);
      SliceSums& s = sums[static_cast<size_t>(i)];
      for (size_t j = 0; j < ref.size(); ++j) {
        if (!std::isfinite(o[j])) {
          ++s.non_finite;
          continue;
        }
        const double d = static_cast<double>(o[j]) - ref[j];
        s.diff_squared += d * d;
        s.ref_squared += ref[j] * ref[j];
        s.max_abs = std::max(s.max_abs, std::abs(d));
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
