#include "attn/cpu_reference.h"

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstring>
#include <limits>
#include <thread>

#include "attn/cpu_thread_pool.h"
#include "cpu_sequences.h"

namespace attn {
namespace {

using internal::AppendToCache;
using internal::KeyOffset;
using internal::KeyRange;
using internal::LseIndex;
using internal::Offset;
using internal::Sequence;
using internal::SequenceOf;
using internal::VisibleKeys;

// Query rows per task, query rows sharing each pass over a key block, and key
// rows per online-softmax step. A task converts the keys its rows can see
// once (O(keys · D)) and then does O(kTaskRows · keys · D) work.
constexpr int64_t kTaskRows = 64;
constexpr int64_t kGroupRows = 4;
constexpr int64_t kKeyBlock = 64;

constexpr float kNegInf = -std::numeric_limits<float>::infinity();

// Per-thread scratch, reused across tasks.
struct Scratch {
  std::vector<float> keys_t;  // [D, L]: keys transposed, so scores vectorise over keys
  std::vector<float> values;  // [L, D]
  std::vector<float> query;   // [kGroupRows, D]
  std::vector<float> acc;     // [kGroupRows, D]
  std::vector<float> row;     // [D]
  std::vector<float> scores;  // [kGroupRows, kKeyBlock]
};

// One task: query rows [row0, row0 + rows) of head h of sequence b.
void RunTask(const AttentionArgs& args, float scale, int64_t b, int64_t h, int64_t row0,
             Scratch& w) {
  const AttentionProblem& p = args.problem;
  const Sequence seq = SequenceOf(args, b);
  const int64_t row_end = std::min(row0 + kTaskRows, seq.sq);
  if (row0 >= row_end) return;
  const int64_t d = p.head_dim;
  const int64_t h_kv = h / (p.heads_q / p.heads_kv);
  const int64_t wl = p.window_left, wr = p.EffectiveWindowRight();
  const DType dtype = args.dtype;
  const size_t elem = DTypeSize(dtype);
  const char* q_base = static_cast<const char*>(args.q);
  const char* k_base = static_cast<const char*>(args.k);
  const char* v_base = static_cast<const char*>(args.v);
  char* out_base = static_cast<char*>(args.out);

  // Keys any row of the task sees: both ends of the range grow with the row.
  const int64_t key_lo = std::max<int64_t>(0, VisibleKeys(row0, seq.sq, seq.sk, wl, wr).lo);
  const int64_t key_hi = std::min(seq.sk - 1, VisibleKeys(row_end - 1, seq.sq, seq.sk, wl, wr).hi);
  const int64_t keys = std::max<int64_t>(0, key_hi - key_lo + 1);
  w.keys_t.resize(keys * d);
  w.values.resize(keys * d);
  w.row.resize(d);
  for (int64_t j = 0; j < keys; ++j) {
    const int64_t token = seq.k_token0 + key_lo + j;
    ToFloat(k_base + KeyOffset(args, args.k_strides, b, token, h_kv) * elem, dtype, d,
            w.row.data());
    for (int64_t c = 0; c < d; ++c) w.keys_t[c * keys + j] = w.row[c];
    ToFloat(v_base + KeyOffset(args, args.v_strides, b, token, h_kv) * elem, dtype, d,
            &w.values[j * d]);
  }

  w.query.resize(kGroupRows * d);
  w.acc.resize(kGroupRows * d);
  w.scores.resize(kGroupRows * kKeyBlock);
  for (int64_t i0 = row0; i0 < row_end; i0 += kGroupRows) {
    const int64_t n = std::min(kGroupRows, row_end - i0);
    KeyRange range[kGroupRows];
    float running_max[kGroupRows], running_sum[kGroupRows];
    for (int64_t r = 0; r < n; ++r) {
      const int64_t token = seq.q_token0 + i0 + r;
      ToFloat(q_base + Offset(args.q_strides, p.varlen, b, token, h) * elem, dtype, d,
              &w.query[r * d]);
      range[r] = VisibleKeys(i0 + r, seq.sq, seq.sk, wl, wr);
      range[r].lo = std::max(range[r].lo, key_lo);
      range[r].hi = std::min(range[r].hi, key_hi);
      running_max[r] = kNegInf;
      running_sum[r] = 0.0f;
    }
    std::fill(w.acc.begin(), w.acc.end(), 0.0f);
    const int64_t group_lo = range[0].lo;
    const int64_t group_hi = range[n - 1].hi;
    for (int64_t j0 = group_lo; j0 <= group_hi; j0 += kKeyBlock) {
      const int64_t block = std::min(kKeyBlock, group_hi - j0 + 1);
      // Scores of the group's rows against the block: S[r][j] = q_r · k_j.
      std::fill(w.scores.begin(), w.scores.end(), 0.0f);
      for (int64_t c = 0; c < d; ++c) {
        const float* key_c = &w.keys_t[c * keys + (j0 - key_lo)];
        for (int64_t r = 0; r < n; ++r) {
          const float qc = w.query[r * d + c];
          float* s = &w.scores[r * kKeyBlock];
          for (int64_t j = 0; j < block; ++j) s[j] += qc * key_c[j];
        }
      }
      for (int64_t r = 0; r < n; ++r) {
        // The part of the block row r sees.
        const int64_t a = std::max(range[r].lo, j0) - j0;
        const int64_t e = std::min(range[r].hi, j0 + block - 1) - j0;
        if (a > e) continue;
        float* s = &w.scores[r * kKeyBlock];
        float block_max = running_max[r];
        for (int64_t j = a; j <= e; ++j) {
          s[j] *= scale;
          block_max = std::max(block_max, s[j]);
        }
        // Online softmax: rescale what was accumulated under the old maximum.
        float* acc = &w.acc[r * d];
        if (block_max != running_max[r]) {
          const float correction = std::exp(running_max[r] - block_max);
          running_sum[r] *= correction;
          for (int64_t c = 0; c < d; ++c) acc[c] *= correction;
          running_max[r] = block_max;
        }
        for (int64_t j = a; j <= e; ++j) {
          const float weight = std::exp(s[j] - block_max);
          running_sum[r] += weight;
          const float* value = &w.values[(j0 - key_lo + j) * d];
          for (int64_t c = 0; c < d; ++c) acc[c] += weight * value[c];
        }
      }
    }
    for (int64_t r = 0; r < n; ++r) {
      const int64_t i = i0 + r;
      float* acc = &w.acc[r * d];
      // A row that sees no key: output 0, LSE -inf.
      const bool empty = running_sum[r] == 0.0f;
      const float inv_sum = empty ? 0.0f : 1.0f / running_sum[r];
      for (int64_t c = 0; c < d; ++c) acc[c] *= inv_sum;
      FromFloat(acc, d, dtype,
                out_base + Offset(args.out_strides, p.varlen, b, seq.q_token0 + i, h) * elem);
      if (p.return_lse) {
        const float lse = empty ? kNegInf : running_max[r] + std::log(running_sum[r]);
        args.lse[LseIndex(p, b, seq.q_token0 + i, h)] = lse;
      }
    }
  }
}

// The float64 reference with an explicit scale.
std::vector<double> NaiveF64(const AttentionProblem& p, double scale, const float* q,
                             const float* k, const float* v, const int32_t* cu_q,
                             const int32_t* cu_k, std::vector<double>* lse) {
  const int64_t d = p.head_dim;
  const int64_t group = p.heads_q / p.heads_kv;
  const int64_t wl = p.window_left, wr = p.EffectiveWindowRight();
  std::vector<double> out(p.QElements(), 0.0);
  if (lse != nullptr)
    lse->assign(p.QTokens() * p.heads_q, -std::numeric_limits<double>::infinity());
  std::vector<double> scores;
  for (int64_t b = 0; b < p.batch; ++b) {
    const int64_t q0 = p.varlen ? cu_q[b] : b * p.seqlen_q;
    const int64_t k0 = p.varlen ? cu_k[b] : b * p.seqlen_k;
    const int64_t sq = p.varlen ? cu_q[b + 1] - cu_q[b] : p.seqlen_q;
    const int64_t sk = p.varlen ? cu_k[b + 1] - cu_k[b] : p.seqlen_k;
    for (int64_t h = 0; h < p.heads_q; ++h) {
      const int64_t h_kv = h / group;
      for (int64_t i = 0; i < sq; ++i) {
        const KeyRange range = VisibleKeys(i, sq, sk, wl, wr);
        const int64_t lo = std::max<int64_t>(0, range.lo), hi = std::min(sk - 1, range.hi);
        if (hi < lo) continue;  // sees nothing: 0 and -inf, as initialised
        const float* query = &q[((q0 + i) * p.heads_q + h) * d];
        scores.assign(hi - lo + 1, 0.0);
        double max_score = -std::numeric_limits<double>::infinity();
        for (int64_t j = lo; j <= hi; ++j) {
          const float* key = &k[((k0 + j) * p.heads_kv + h_kv) * d];
          double dot = 0.0;
          for (int64_t c = 0; c < d; ++c) dot += static_cast<double>(query[c]) * key[c];
          scores[j - lo] = dot * scale;
          max_score = std::max(max_score, scores[j - lo]);
        }
        double sum = 0.0;
        for (double& s : scores) {
          s = std::exp(s - max_score);
          sum += s;
        }
        double* o = &out[((q0 + i) * p.heads_q + h) * d];
        for (int64_t j = lo; j <= hi; ++j) {
          const double weight = scores[j - lo] / sum;
          const float* value = &v[((k0 + j) * p.heads_kv + h_kv) * d];
          for (int64_t c = 0; c < d; ++c) o[c] += weight * value[c];
        }
        if (lse != nullptr) {
          const int64_t index = p.varlen ? h * p.total_q + q0 + i : (b * p.heads_q + h) * sq + i;
          (*lse)[index] = max_score + std::log(sum);
        }
      }
    }
  }
  return out;
}

}  // namespace

bool AttentionCpu(const AttentionArgs& args, CpuThreadPool& pool, const std::atomic<bool>* cancel) {
  const AttentionProblem& p = args.problem;
  const float scale = p.ResolvedScale();
  if (p.kv_cache && p.append) AppendToCache(args);
  // Varlen: seqlen_q is the longest sequence; shorter ones skip their extra
  // tasks.
  const int64_t row_tasks = (p.seqlen_q + kTaskRows - 1) / kTaskRows;
  return pool.Run(
      p.batch * p.heads_q * row_tasks,
      [&](int64_t t, int /*worker*/) {
        thread_local Scratch scratch;
        const int64_t row_task = t % row_tasks;
        const int64_t h = (t / row_tasks) % p.heads_q;
        const int64_t b = t / (row_tasks * p.heads_q);
        RunTask(args, scale, b, h, row_task * kTaskRows, scratch);
      },
      cancel);
}

bool AttentionCpu(const AttentionArgs& args, int num_threads, const std::atomic<bool>* cancel) {
  const AttentionProblem& p = args.problem;
  const int64_t tasks = p.batch * p.heads_q * ((p.seqlen_q + kTaskRows - 1) / kTaskRows);
  if (num_threads <= 0) num_threads = CpuThreadPool::AvailableCores();
  CpuThreadPool pool(static_cast<int>(std::max<int64_t>(1, std::min<int64_t>(num_threads, tasks))));
  return AttentionCpu(args, pool, cancel);
}

std::vector<double> AttentionNaiveF64(const AttentionProblem& problem, const float* q,
                                      const float* k, const float* v, const int32_t* cu_seqlens_q,
                                      const int32_t* cu_seqlens_k, std::vector<double>* lse) {
  return NaiveF64(problem, problem.ResolvedScale(), q, k, v, cu_seqlens_q, cu_seqlens_k, lse);
}

std::vector<double> AttentionNaiveF64(const float* q, const float* k, const float* v,
                                      const Shape& s, double scale) {
  const AttentionProblem p =
      AttentionProblem::SelfAttention(s.batch, s.seq_len, s.num_heads, s.head_dim);
  return NaiveF64(p, scale, q, k, v, nullptr, nullptr, nullptr);
}

}  // namespace attn
