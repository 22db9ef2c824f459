#include "attn/cpu_reference.h"

#include <algorithm>
#include <atomic>
#include <cmath>
#include <limits>
#include <thread>

namespace attn {
namespace {

// Query rows per task and key rows per online-softmax step. A task converts
// its head's K and V once (O(S·D)) and then does O(kTaskRows·S·D) work.
constexpr int64_t kTaskRows = 128;
constexpr int64_t kKeyBlock = 64;

// One task: query rows [row0, row0 + rows) of head (b, h).
void RunTask(const AttentionArgs& args, float scale, int64_t b, int64_t h, int64_t row0,
             int64_t rows, std::vector<float>& keys, std::vector<float>& values) {
  const Shape& s = args.q.shape;
  const int64_t d = s.head_dim;
  const int64_t stride = s.RowStride();
  const int64_t head_offset = b * s.seq_len * stride + h * d;
  const DType dtype = args.q.dtype;

  // Convert this head's K and V rows into contiguous float [S, D].
  keys.resize(s.seq_len * d);
  values.resize(s.seq_len * d);
  for (int64_t j = 0; j < s.seq_len; ++j) {
    const int64_t offset = (head_offset + j * stride) * 2;
    ToFloat(static_cast<const char*>(args.k.data) + offset, dtype, d, &keys[j * d]);
    ToFloat(static_cast<const char*>(args.v.data) + offset, dtype, d, &values[j * d]);
  }

  std::vector<float> query(d), acc(d), scores(kKeyBlock);
  for (int64_t i = row0; i < row0 + rows; ++i) {
    const int64_t offset = (head_offset + i * stride) * 2;
    ToFloat(static_cast<const char*>(args.q.data) + offset, dtype, d, query.data());
    std::fill(acc.begin(), acc.end(), 0.0f);
    float running_max = -std::numeric_limits<float>::infinity();
    float running_sum = 0.0f;
    for (int64_t j0 = 0; j0 < s.seq_len; j0 += kKeyBlock) {
      const int64_t block = std::min(kKeyBlock, s.seq_len - j0);
      float block_max = running_max;
      for (int64_t j = 0; j < block; ++j) {
        const float* key = &keys[(j0 + j) * d];
        float dot = 0.0f;
        for (int64_t c = 0; c < d; ++c) dot += query[c] * key[c];
        scores[j] = dot * scale;
        block_max = std::max(block_max, scores[j]);
      }
      // Online softmax: rescale what was accumulated under the old maximum.
      const float correction = std::exp(running_max - block_max);
      running_sum *= correction;
      for (int64_t c = 0; c < d; ++c) acc[c] *= correction;
      for (int64_t j = 0; j < block; ++j) {
        const float p = std::exp(scores[j] - block_max);
        running_sum += p;
        const float* value = &values[(j0 + j) * d];
        for (int64_t c = 0; c < d; ++c) acc[c] += p * value[c];
      }
      running_max = block_max;
    }
    const float inv_sum = 1.0f / running_sum;
    for (int64_t c = 0; c < d; ++c) acc[c] *= inv_sum;
    FromFloat(acc.data(), d, dtype, static_cast<char*>(args.out.data) + offset);
  }
}

}  // namespace

void AttentionCpu(const AttentionArgs& args, int num_threads) {
  const Shape& s = args.q.shape;
  const float scale = args.ResolvedScale();
  const int64_t row_tasks = (s.seq_len + kTaskRows - 1) / kTaskRows;
  const int64_t tasks = s.batch * s.num_heads * row_tasks;
  if (num_threads <= 0) num_threads = static_cast<int>(std::thread::hardware_concurrency());
  num_threads = static_cast<int>(std::max<int64_t>(1, std::min<int64_t>(num_threads, tasks)));

  std::atomic<int64_t> next{0};
  auto worker = [&]() {
    std::vector<float> keys, values;
    for (int64_t t = next++; t < tasks; t = next++) {
      const int64_t row_task = t % row_tasks;
      const int64_t h = (t / row_tasks) % s.num_heads;
      const int64_t b = t / (row_tasks * s.num_heads);
      const int64_t row0 = row_task * kTaskRows;
      RunTask(args, scale, b, h, row0, std::min(kTaskRows, s.seq_len - row0), keys, values);
    }
  };
  std::vector<std::thread> threads;
  for (int i = 1; i < num_threads; ++i) threads.emplace_back(worker);
  worker();
  for (std::thread& t : threads) t.join();
}

std::vector<double> AttentionNaiveF64(const float* q, const float* k, const float* v,
                                      const Shape& s, double scale) {
  const int64_t d = s.head_dim;
  const int64_t stride = s.RowStride();
  std::vector<double> out(s.NumElements());
  std::vector<double> scores(s.seq_len);
  for (int64_t b = 0; b < s.batch; ++b) {
    for (int64_t h = 0; h < s.num_heads; ++h) {
      const int64_t base = b * s.seq_len * stride + h * d;
      for (int64_t i = 0; i < s.seq_len; ++i) {
        double max_score = -std::numeric_limits<double>::infinity();
        for (int64_t j = 0; j < s.seq_len; ++j) {
          double dot = 0.0;
          for (int64_t c = 0; c < d; ++c) {
            dot += static_cast<double>(q[base + i * stride + c]) * k[base + j * stride + c];
          }
          scores[j] = dot * scale;
          max_score = std::max(max_score, scores[j]);
        }
        double sum = 0.0;
        for (int64_t j = 0; j < s.seq_len; ++j) {
          scores[j] = std::exp(scores[j] - max_score);
          sum += scores[j];
        }
        double* o = &out[base + i * stride];
        for (int64_t c = 0; c < d; ++c) o[c] = 0.0;
        for (int64_t j = 0; j < s.seq_len; ++j) {
          const double p = scores[j] / sum;
          for (int64_t c = 0; c < d; ++c) o[c] += p * v[base + j * stride + c];
        }
      }
    }
  }
  return out;
}

}  // namespace attn
