#include "call_split.h"

#include <algorithm>
#include <cstring>
#include <utility>

#include "wire_codec.h"

namespace attn::internal {
namespace {

// A shard's rectangle in one [batch, seq, heads, head_dim] tensor of the
// whole call, in bytes: rows of `row_bytes` (one token's heads), of which the
// shard takes `take_bytes` starting at `skip_bytes`.
struct TensorWindow {
  int64_t first_row = 0, rows = 0;
  int64_t row_bytes = 0, skip_bytes = 0, take_bytes = 0;
  bool contiguous() const { return take_bytes == row_bytes; }
};

TensorWindow Window(const Shard& shard, int64_t seq_len, int64_t heads, int64_t head_begin,
                    int64_t head_end, int64_t head_dim, DType dtype) {
  const int64_t head_bytes = head_dim * static_cast<int64_t>(DTypeSize(dtype));
  TensorWindow w;
  w.first_row = shard.batch_begin * seq_len;
  w.rows = (shard.batch_end - shard.batch_begin) * seq_len;
  w.row_bytes = heads * head_bytes;
  w.skip_bytes = head_begin * head_bytes;
  w.take_bytes = (head_end - head_begin) * head_bytes;
  return w;
}

int64_t Group(const AttentionInputs& inputs) {
  return inputs.shape.num_heads / inputs.NumHeadsKv();
}

TensorWindow QWindow(const AttentionInputs& whole, const Shard& shard) {
  const int64_t group = Group(whole);
  return Window(shard, whole.shape.seq_len, whole.shape.num_heads, shard.kv_head_begin * group,
                shard.kv_head_end * group, whole.shape.head_dim, whole.dtype);
}

TensorWindow KvWindow(const AttentionInputs& whole, const Shard& shard) {
  return Window(shard, whole.SeqLenKv(), whole.NumHeadsKv(), shard.kv_head_begin,
                shard.kv_head_end, whole.shape.head_dim, whole.dtype);
}

absl::string_view View(absl::string_view tensor, const TensorWindow& w) {
  return tensor.substr(static_cast<size_t>(w.first_row * w.row_bytes),
                       static_cast<size_t>(w.rows * w.row_bytes));
}

std::string Gather(absl::string_view tensor, const TensorWindow& w) {
  std::string shard(static_cast<size_t>(w.rows * w.take_bytes), '\0');
  const char* from = tensor.data() + w.first_row * w.row_bytes + w.skip_bytes;
  char* to = &shard[0];
  for (int64_t r = 0; r < w.rows; ++r) {
    std::memcpy(to + r * w.take_bytes, from + r * w.row_bytes, static_cast<size_t>(w.take_bytes));
  }
  return shard;
}

}  // namespace

bool SplittableCall(const AttentionInputs& inputs, const AttendOptions& options) {
  const bool by_reference = inputs.q_ref.set() || inputs.k_ref.set() || inputs.v_ref.set() ||
                            options.out_ref.set() || options.lse_ref.set();
  return options.allow_split && !by_reference && !inputs.varlen();
}

int64_t MaxShards(const AttentionInputs& inputs) {
  return std::max(inputs.shape.batch, inputs.NumHeadsKv());
}

std::vector<Shard> PlanShards(const AttentionInputs& inputs, int64_t shards) {
  const int64_t batch = inputs.shape.batch;
  const int64_t kv_heads = inputs.NumHeadsKv();
  const int64_t by_batch = std::clamp<int64_t>(shards, 1, batch);
  const int64_t by_heads = std::clamp<int64_t>(shards, 1, kv_heads);
  const bool along_batch = by_batch >= by_heads;
  const int64_t n = along_batch ? by_batch : by_heads;
  const int64_t extent = along_batch ? batch : kv_heads;
  std::vector<Shard> plan(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) {
    const int64_t begin = i * extent / n, end = (i + 1) * extent / n;
    Shard& s = plan[static_cast<size_t>(i)];
    s = Shard{0, batch, 0, kv_heads};
    if (along_batch) {
      s.batch_begin = begin;
      s.batch_end = end;
    } else {
      s.kv_head_begin = begin;
      s.kv_head_end = end;
    }
  }
  return plan;
}

std::shared_ptr<const AttentionInputs> ShardInputs(
    const std::shared_ptr<const AttentionInputs>& whole, const Shard& shard) {
  auto part = std::make_unique<AttentionInputs>();
  part->dtype = whole->dtype;
  part->shape = Shape{shard.batch_end - shard.batch_begin, whole->shape.seq_len,
                      (shard.kv_head_end - shard.kv_head_begin) * Group(*whole),
                      whole->shape.head_dim};
  part->kv_seq_len = whole->kv_seq_len;
  part->kv_num_heads = whole->kv_num_heads > 0 ? shard.kv_head_end - shard.kv_head_begin : 0;
  const TensorWindow q = QWindow(*whole, shard), kv = KvWindow(*whole, shard);
  if (!q.contiguous()) {
    part->q = Gather(whole->QData(), q);
    part->k = Gather(whole->KData(), kv);
    part->v = Gather(whole->VData(), kv);
    return std::shared_ptr<const AttentionInputs>(std::move(part));
  }
  // Views into the caller's tensors: the shard holds `whole` until released.
  part->borrowed_q = View(whole->QData(), q);
  part->borrowed_k = View(whole->KData(), kv);
  part->borrowed_v = View(whole->VData(), kv);
  return std::shared_ptr<const AttentionInputs>(
      part.release(), [keep = whole](const AttentionInputs* p) { delete p; });
}

void ScatterOutput(const AttentionInputs& whole, const Shard& shard,
                   absl::Span<const absl::string_view> shard_out, char* out) {
  const TensorWindow w = QWindow(whole, shard);
  char* to = out + w.first_row * w.row_bytes + w.skip_bytes;
  if (w.contiguous()) {
    CopyPieces(shard_out, to);
    return;
  }
  // The shard's rows of take_bytes go row_bytes apart; a piece may end or
  // begin anywhere in a row.
  int64_t row = 0, in_row = 0;
  for (absl::string_view piece : shard_out) {
    while (!piece.empty()) {
      const size_t n = std::min(piece.size(), static_cast<size_t>(w.take_bytes - in_row));
      std::memcpy(to + row * w.row_bytes + in_row, piece.data(), n);
      piece.remove_prefix(n);
      in_row += static_cast<int64_t>(n);
      if (in_row == w.take_bytes) {
        ++row;
        in_row = 0;
      }
    }
  }
}

void ScatterLse(const AttentionInputs& whole, const Shard& shard,
                const std::vector<float>& shard_lse, std::vector<float>* lse) {
  // [batch, num_heads, seq_len]: per batch entry, the shard's query heads
  // are one contiguous block.
  const int64_t group = Group(whole);
  const int64_t seq = whole.shape.seq_len, heads = whole.shape.num_heads;
  const int64_t head_begin = shard.kv_head_begin * group;
  const int64_t block = (shard.kv_head_end - shard.kv_head_begin) * group * seq;
  for (int64_t b = shard.batch_begin; b < shard.batch_end; ++b) {
    std::memcpy(lse->data() + (b * heads + head_begin) * seq,
                shard_lse.data() + (b - shard.batch_begin) * block,
                static_cast<size_t>(block) * sizeof(float));
  }
}

}  // namespace attn::internal
