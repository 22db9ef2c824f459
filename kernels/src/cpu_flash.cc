#include "attn/cpu_flash.h"

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <string>
#include <vector>

#include "attn/dtype.h"
#include "cpu_matmul.h"
#include "cpu_sequences.h"
#include "cpu_vector_math.h"

namespace attn {
namespace {

using internal::KeyRange;
using internal::MatmulShape;
using internal::MatmulType;
using internal::Sequence;
using internal::TileMatmul;

// Rows of a Q tile (query positions × the heads of one KV group): enough for
// the products to run near the matrix units' rate, few enough that a
// 4096-token head still splits into 32 tasks.
constexpr int64_t kTileRows = 128;
// Keys per block: more for small tiles (decode), where each block's two
// products are cheap next to their call overhead.
constexpr int64_t kKeyBlock = 256;
constexpr int64_t kSmallTileKeyBlock = 512;
constexpr int64_t kSmallTileRows = 16;

constexpr float kNegInf = -std::numeric_limits<float>::infinity();

// Per call: how the problem maps onto tiles and tasks.
struct Layout {
  MatmulType type;
  size_t operand_bytes;  // of one element of the products' operands
  int64_t d, group;      // head_dim, query heads per KV head
  int64_t positions;     // query positions per tile
  int64_t tiles;         // tiles per (sequence, KV head), for the longest sequence
  float scale;
};

Layout LayoutOf(const AttentionArgs& args) {
  const AttentionProblem& p = args.problem;
  Layout l;
  // bf16 operands feed the bf16 products as they are where the host has
  // them (AVX-512-BF16, AMX); fp16 ones, and bf16 on other hosts, are
  // widened to f32 (oneDNN 2.6 has no f16 matmul off AVX-512-FP16 hosts).
  // ATTN_CPU_FLASH_F32=1 forces f32 (the path of other hosts, for tests and
  // benchmarks; read at each call).
  const char* force_f32 = std::getenv("ATTN_CPU_FLASH_F32");
  const bool f32 = (force_f32 != nullptr && std::string(force_f32) == "1") ||
                   args.dtype != DType::kBFloat16 || !TileMatmul::HasBf16();
  l.type = f32 ? MatmulType::kF32 : MatmulType::kBF16;
  l.operand_bytes = f32 ? 4 : 2;
  l.d = p.head_dim;
  l.group = p.heads_q / p.heads_kv;
  l.positions = std::max<int64_t>(1, kTileRows / l.group);
  l.tiles = (p.seqlen_q + l.positions - 1) / l.positions;
  l.scale = p.ResolvedScale();
  return l;
}

// Per worker thread, reused across tasks and calls.
struct Scratch {
  std::vector<char> q, k, v, p;  // operands: [M, D], [Bk, D], [Bk, D], [M, Bk]
  std::vector<float> s, o, row;  // scores [M, Bk], accumulator [M, D], one row of P
};

Scratch& WorkerScratch() {
  thread_local Scratch scratch;
  return scratch;
}

// Copies `rows` rows of D elements (16-bit, at `src` + offset(r) elements)
// into `dst` in the products' operand type; rows up to `padded` are zeroed.
template <typename OffsetFn>
void GatherRows(const AttentionArgs& args, const Layout& l, int64_t rows, int64_t padded,
                OffsetFn offset, const void* src, char* dst) {
  const uint16_t* base = static_cast<const uint16_t*>(src);
  const size_t row_bytes = l.d * l.operand_bytes;
  for (int64_t r = 0; r < rows; ++r) {
    const uint16_t* from = base + offset(r);
    char* to = dst + r * row_bytes;
    if (l.type != MatmulType::kF32) {
      std::memcpy(to, from, row_bytes);
    } else if (args.dtype == DType::kBFloat16) {
      internal::Bf16ToFloatRow(from, static_cast<int>(l.d), reinterpret_cast<float*>(to));
    } else {
      internal::HalfToFloatRow(from, static_cast<int>(l.d), reinterpret_cast<float*>(to));
    }
  }
  if (padded > rows) std::memset(dst + rows * row_bytes, 0, (padded - rows) * row_bytes);
}

// One task: query positions [pos0, pos0 + positions) of sequence b, every
// query head of KV head h_kv.
void RunTile(const AttentionArgs& args, const Layout& l, int64_t b, int64_t h_kv, int64_t pos0) {
  const AttentionProblem& p = args.problem;
  const Sequence seq = internal::SequenceOf(args, b);
  const int64_t npos = std::min(l.positions, seq.sq - pos0);
  if (npos <= 0) return;
  const int64_t d = l.d, group = l.group;
  const int64_t m = npos * group;  // tile rows: r = position * group + head in group
  const int64_t wl = p.window_left, wr = p.EffectiveWindowRight();

  // The keys any row of the tile sees: both ends grow with the position.
  const int64_t key_lo =
      std::max<int64_t>(0, internal::VisibleKeys(pos0, seq.sq, seq.sk, wl, wr).lo);
  const int64_t key_hi =
      std::min(seq.sk - 1, internal::VisibleKeys(pos0 + npos - 1, seq.sq, seq.sk, wl, wr).hi);
  const int64_t block = m <= kSmallTileRows ? kSmallTileKeyBlock : kKeyBlock;

  Scratch& w = WorkerScratch();
  w.q.resize(m * d * l.operand_bytes);
  w.k.resize(block * d * l.operand_bytes);
  w.v.resize(block * d * l.operand_bytes);
  w.p.resize(m * block * l.operand_bytes);
  w.s.resize(m * block);
  w.o.assign(m * d, 0.0f);
  w.row.resize(block);

  GatherRows(
      args, l, m, m,
      [&](int64_t r) {
        return internal::Offset(args.q_strides, p.varlen, b, seq.q_token0 + pos0 + r / group,
                                h_kv * group + r % group);
      },
      args.q, w.q.data());

  float running_max[kTileRows], running_sum[kTileRows];
  KeyRange range[kTileRows];
  for (int64_t i = 0; i < npos; ++i) {
    range[i] = internal::VisibleKeys(pos0 + i, seq.sq, seq.sk, wl, wr);
  }
  std::fill_n(running_max, m, kNegInf);
  std::fill_n(running_sum, m, 0.0f);

  MatmulShape scores{l.type, m, block, d, d, d, block, /*b_transposed=*/true, false};
  MatmulShape values{l.type, m, d, block, block, d, d, /*b_transposed=*/false, true};
  const TileMatmul* scores_mm = TileMatmul::Get(scores);
  const TileMatmul* values_mm = TileMatmul::Get(values);

  for (int64_t j0 = key_lo; j0 <= key_hi; j0 += block) {
    const int64_t n = std::min(block, key_hi - j0 + 1);
    auto key_offset = [&](const TensorStrides& strides) {
      return [&, strides](int64_t r) {
        return internal::KeyOffset(args, strides, b, seq.k_token0 + j0 + r, h_kv);
      };
    };
    GatherRows(args, l, n, block, key_offset(args.k_strides), args.k, w.k.data());
    GatherRows(args, l, n, block, key_offset(args.v_strides), args.v, w.v.data());
    scores_mm->Run(w.q.data(), w.k.data(), w.s.data());

    for (int64_t r = 0; r < m; ++r) {
      const KeyRange& visible = range[r / group];
      const int lo = static_cast<int>(std::max(visible.lo, j0) - j0);
      const int hi = static_cast<int>(std::min(visible.hi, j0 + n - 1) - j0);
      const float* s = &w.s[r * block];
      const float block_max = internal::MaskedScaledMax(s, l.scale, lo, hi);
      // Online softmax: rescale what was accumulated under the old maximum.
      if (block_max > running_max[r]) {
        if (running_max[r] != kNegInf) {
          const float correction = std::exp(running_max[r] - block_max);
          running_sum[r] *= correction;
          internal::ScaleRow(&w.o[r * d], static_cast<int>(d), correction);
        }
        running_max[r] = block_max;
      }
      // A row that sees none of the block keeps its state and adds zeros
      // (lo > hi: every weight 0, whatever the maximum).
      const float max = running_max[r] == kNegInf ? 0.0f : running_max[r];
      const int width = static_cast<int>(block);
      if (l.type != MatmulType::kF32) {
        running_sum[r] += internal::MaskedExp(s, width, l.scale, max, lo, hi, w.row.data());
        internal::FloatToBf16Row(w.row.data(), width,
                                 reinterpret_cast<uint16_t*>(w.p.data()) + r * block);
      } else {
        running_sum[r] += internal::MaskedExp(s, width, l.scale, max, lo, hi,
                                              reinterpret_cast<float*>(w.p.data()) + r * block);
      }
    }
    values_mm->Run(w.p.data(), w.v.data(), w.o.data());
  }

  for (int64_t r = 0; r < m; ++r) {
    const int64_t token = seq.q_token0 + pos0 + r / group;
    const int64_t h = h_kv * group + r % group;
    // A row that sees no key: output 0, LSE -inf.
    const bool empty = running_sum[r] == 0.0f;
    float* o = &w.o[r * d];
    internal::ScaleRow(o, static_cast<int>(d), empty ? 0.0f : 1.0f / running_sum[r]);
    uint16_t* out = static_cast<uint16_t*>(args.out) +
                    internal::Offset(args.out_strides, p.varlen, b, token, h);
    if (args.dtype == DType::kBFloat16) {
      internal::FloatToBf16Row(o, static_cast<int>(d), out);
    } else {
      internal::FloatToHalfRow(o, static_cast<int>(d), out);
    }
    if (p.return_lse) {
      args.lse[internal::LseIndex(p, b, token, h)] =
          empty ? kNegInf : running_max[r] + std::log(running_sum[r]);
    }
  }
}

}  // namespace

bool AttentionCpuFlash(const AttentionArgs& args, CpuThreadPool& pool,
                       const std::atomic<bool>* cancel) {
  const AttentionProblem& p = args.problem;
  if (p.kv_cache && p.append) internal::AppendToCache(args);
  const Layout layout = LayoutOf(args);
  const int64_t heads = p.batch * p.heads_kv;
  // Heaviest first: the last tiles of a causal sequence see the most keys.
  return pool.Run(
      heads * layout.tiles,
      [&](int64_t task, int /*worker*/) {
        const int64_t tile = layout.tiles - 1 - task / heads;
        const int64_t bh = task % heads;
        RunTile(args, layout, bh / p.heads_kv, bh % p.heads_kv, tile * layout.positions);
      },
      cancel);
}

}  // namespace attn
