#include "attn/client/attend_types.h"

#include <algorithm>
#include <random>
#include <vector>

#include "absl/strings/str_cat.h"

namespace attn {
namespace {

// Longest sequence of `cu_seqlens` (0 when empty).
int64_t Longest(const std::vector<int32_t>& cu_seqlens) {
  int64_t longest = 0;
  for (size_t b = 1; b < cu_seqlens.size(); ++b) {
    longest = std::max<int64_t>(longest, int64_t{cu_seqlens[b]} - cu_seqlens[b - 1]);
  }
  return longest;
}

absl::Status CheckOffsets(const char* name, const std::vector<int32_t>& cu_seqlens, int64_t batch) {
  if (static_cast<int64_t>(cu_seqlens.size()) != batch + 1) {
    return absl::InvalidArgumentError(absl::StrCat(
        name, " has ", cu_seqlens.size(), " offsets; batch ", batch, " needs ", batch + 1));
  }
  if (cu_seqlens.front() != 0) {
    return absl::InvalidArgumentError(
        absl::StrCat(name, "[0] is ", cu_seqlens.front(), "; it must be 0"));
  }
  for (size_t b = 1; b < cu_seqlens.size(); ++b) {
    if (cu_seqlens[b] < cu_seqlens[b - 1]) {
      return absl::InvalidArgumentError(absl::StrCat(
          name, " decreases at index ", b, " (", cu_seqlens[b - 1], " then ", cu_seqlens[b], ")"));
    }
  }
  return absl::OkStatus();
}

}  // namespace

int64_t AttentionInputs::SeqLenQ() const {
  if (varlen() && shape.seq_len <= 0) return Longest(cu_seqlens_q);
  return shape.seq_len;
}

int64_t AttentionInputs::SeqLenKv() const {
  if (kv_seq_len > 0) return kv_seq_len;
  if (varlen()) return Longest(cu_seqlens_k);
  return shape.seq_len;
}

int64_t AttentionInputs::TokensQ() const {
  if (varlen()) return cu_seqlens_q.empty() ? 0 : cu_seqlens_q.back();
  return shape.batch * shape.seq_len;
}

int64_t AttentionInputs::TokensKv() const {
  if (varlen()) return cu_seqlens_k.empty() ? 0 : cu_seqlens_k.back();
  return shape.batch * SeqLenKv();
}

int64_t AttentionInputs::QBytes() const {
  return TokensQ() * shape.num_heads * shape.head_dim * static_cast<int64_t>(DTypeSize(dtype));
}

int64_t AttentionInputs::KvBytes() const {
  return TokensKv() * NumHeadsKv() * shape.head_dim * static_cast<int64_t>(DTypeSize(dtype));
}

bool AttentionInputs::IsSelfAttentionShape() const {
  return !varlen() && SeqLenKv() == shape.seq_len && NumHeadsKv() == shape.num_heads;
}

absl::Status AttentionInputs::Validate() const {
  for (const Shape::NamedDim& dim : shape.NamedDims()) {
    // With varlen, seq_len 0 means "the longest sequence of cu_seqlens_q".
    if (varlen() && std::string(dim.name) == "seq_len" && dim.value == 0) continue;
    if (dim.value < 1) {
      return absl::InvalidArgumentError(
          absl::StrCat("shape.", dim.name, " is ", dim.value, "; it must be >= 1"));
    }
  }
  if (kv_seq_len < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("kv_seq_len is ", kv_seq_len, "; it must be >= 1, or 0 for seq_len"));
  }
  if (kv_num_heads < 0 || shape.num_heads % NumHeadsKv() != 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("kv_num_heads is ", kv_num_heads, "; it must divide num_heads (",
                     shape.num_heads, "), or be 0 for num_heads (no grouped-query attention)"));
  }
  if (varlen()) {
    if (cu_seqlens_q.empty() || cu_seqlens_k.empty()) {
      return absl::InvalidArgumentError(
          "cu_seqlens_q and cu_seqlens_k: give both (varlen) or neither");
    }
    if (absl::Status s = CheckOffsets("cu_seqlens_q", cu_seqlens_q, shape.batch); !s.ok()) return s;
    if (absl::Status s = CheckOffsets("cu_seqlens_k", cu_seqlens_k, shape.batch); !s.ok()) return s;
    if (shape.seq_len > 0 && Longest(cu_seqlens_q) > shape.seq_len) {
      return absl::InvalidArgumentError(
          absl::StrCat("shape.seq_len (max_seqlen_q) is ", shape.seq_len,
                       " but cu_seqlens_q has a sequence of ", Longest(cu_seqlens_q)));
    }
    if (kv_seq_len > 0 && Longest(cu_seqlens_k) > kv_seq_len) {
      return absl::InvalidArgumentError(absl::StrCat("kv_seq_len (max_seqlen_k) is ", kv_seq_len,
                                                     " but cu_seqlens_k has a sequence of ",
                                                     Longest(cu_seqlens_k)));
    }
  }
  const struct {
    const char* name;
    absl::string_view bytes;
    int64_t expected;
    const TensorRef* ref;
  } tensors[] = {{"q", QData(), QBytes(), &q_ref},
                 {"k", KData(), KvBytes(), &k_ref},
                 {"v", VData(), KvBytes(), &v_ref}};
  for (const auto& tensor : tensors) {
    if (tensor.ref->set()) {
      // In a region: nothing inline, and the reference covers the tensor.
      if (!tensor.bytes.empty()) {
        return absl::InvalidArgumentError(absl::StrCat(
            tensor.name, " has ", tensor.bytes.size(), " bytes and ", tensor.name,
            "_ref is set; give the tensor inline or by reference"));
      }
      if (tensor.ref->byte_size != tensor.expected) {
        return absl::InvalidArgumentError(absl::StrCat(tensor.name, "_ref.byte_size is ",
                                                       tensor.ref->byte_size, "; the tensor has ",
                                                       tensor.expected, " bytes"));
      }
      continue;
    }
    if (static_cast<int64_t>(tensor.bytes.size()) != tensor.expected) {
      const bool is_q = &tensor == &tensors[0];
      const std::string layout =
          varlen() ? absl::StrCat("[", is_q ? TokensQ() : TokensKv(), ", ",
                                  is_q ? shape.num_heads : NumHeadsKv(), ", ", shape.head_dim, "]")
                   : Shape{shape.batch, is_q ? shape.seq_len : SeqLenKv(),
                           is_q ? shape.num_heads : NumHeadsKv(), shape.head_dim}
                         .ToString();
      return absl::InvalidArgumentError(absl::StrCat(tensor.name, " has ", tensor.bytes.size(),
                                                     " bytes; a ", DTypeName(dtype), " ", layout,
                                                     " tensor has ", tensor.expected));
    }
  }
  return absl::OkStatus();
}

const char* TensorPathName(TensorPath path) {
  switch (path) {
    case TensorPath::kUnspecified:
      return "unspecified";
    case TensorPath::kInline:
      return "inline";
    case TensorPath::kSystemShm:
      return "system_shm";
    case TensorPath::kCudaIpc:
      return "cuda_ipc";
  }
  return "unspecified";
}

AttentionProblem AttentionInputs::Problem(const AttendOptions& options) const {
  AttentionProblem p;
  p.batch = shape.batch;
  p.seqlen_q = SeqLenQ();
  p.seqlen_k = SeqLenKv();
  p.heads_q = shape.num_heads;
  p.heads_kv = NumHeadsKv();
  p.head_dim = shape.head_dim;
  p.causal = options.causal;
  p.window_left = options.window_left;
  p.window_right = options.window_right;
  p.softmax_scale = options.softmax_scale.value_or(0.0f);
  p.return_lse = options.return_lse;
  p.varlen = varlen();
  if (p.varlen) {
    p.total_q = TokensQ();
    p.total_k = TokensKv();
  }
  return p;
}

double AttentionInputs::Flops(const AttendOptions& options) const {
  const AttentionProblem problem = Problem(options);
  const bool offsets = problem.varlen &&
                       static_cast<int64_t>(cu_seqlens_q.size()) == shape.batch + 1 &&
                       cu_seqlens_k.size() == cu_seqlens_q.size();
  return problem.Flops(offsets ? cu_seqlens_q.data() : nullptr,
                       offsets ? cu_seqlens_k.data() : nullptr);
}

AttentionInputs MakeRandomInputs(const Shape& shape, DType dtype, uint64_t seed) {
  AttentionInputs geometry;
  geometry.dtype = dtype;
  geometry.shape = shape;
  return MakeRandomInputs(std::move(geometry), seed);
}

AttentionInputs MakeRandomInputs(AttentionInputs inputs, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::vector<float> values;
  const int64_t q_elements = std::max<int64_t>(inputs.QBytes() / 2, 0);
  const int64_t kv_elements = std::max<int64_t>(inputs.KvBytes() / 2, 0);
  const std::pair<std::string*, int64_t> tensors[] = {
      {&inputs.q, q_elements}, {&inputs.k, kv_elements}, {&inputs.v, kv_elements}};
  for (const auto& [tensor, n] : tensors) {
    values.resize(static_cast<size_t>(n));
    for (float& value : values) value = normal(rng);
    tensor->resize(static_cast<size_t>(n) * DTypeSize(inputs.dtype));
    FromFloat(values.data(), values.size(), inputs.dtype, tensor->data());
  }
  return inputs;
}

absl::StatusOr<AttentionInputs> MakeGeometry(const Shape& shape, DType dtype,
                                             const std::optional<Shape>& kv_shape,
                                             std::vector<int32_t> cu_seqlens_q,
                                             std::vector<int32_t> cu_seqlens_k) {
  AttentionInputs g;
  g.dtype = dtype;
  g.shape = shape;
  for (const Shape::NamedDim& dim : shape.NamedDims()) {
    if (dim.value < 1) {
      return absl::InvalidArgumentError(
          absl::StrCat("shape ", shape.ToString(), ": every dimension must be >= 1"));
    }
  }
  if (kv_shape.has_value()) {
    const Shape& kv = *kv_shape;
    if (kv.batch != shape.batch || kv.head_dim != shape.head_dim || kv.seq_len < 1 ||
        kv.num_heads < 1) {
      return absl::InvalidArgumentError(
          absl::StrCat("kv shape ", kv.ToString(), " does not go with shape ", shape.ToString(),
                       ": batch and head_dim must agree, kv_seq_len and kv_num_heads be >= 1"));
    }
    if (kv.seq_len != shape.seq_len) g.kv_seq_len = kv.seq_len;
    if (kv.num_heads != shape.num_heads) g.kv_num_heads = kv.num_heads;
  }
  if (cu_seqlens_q.empty() != cu_seqlens_k.empty()) {
    return absl::InvalidArgumentError(
        "cu_seqlens_q and cu_seqlens_k: give both (varlen) or neither");
  }
  if (!cu_seqlens_q.empty()) {
    if (cu_seqlens_q.size() < 2) {
      return absl::InvalidArgumentError("cu_seqlens_q: at least two offsets (one sequence)");
    }
    g.shape.batch = static_cast<int64_t>(cu_seqlens_q.size()) - 1;
    g.cu_seqlens_q = std::move(cu_seqlens_q);
    g.cu_seqlens_k = std::move(cu_seqlens_k);
    g.shape.seq_len = 0;
    g.kv_seq_len = 0;
    g.shape.seq_len = g.SeqLenQ();
    g.kv_seq_len = g.SeqLenKv();
  }
  return g;
}

std::vector<int32_t> CumulativeSeqlens(const std::vector<int64_t>& lengths) {
  std::vector<int32_t> offsets{0};
  for (int64_t length : lengths) offsets.push_back(static_cast<int32_t>(offsets.back() + length));
  return offsets;
}

int64_t ServerTiming::OtherNs() const {
  return std::max<int64_t>(
      0, total_ns - receive_ns - decode_ns - queue_ns - h2d_ns - kernel_ns - d2h_ns);
}

int64_t ClientTiming::NetworkNs(const ServerTiming& server) const {
  return std::max<int64_t>(0, round_trip_ns - marshal_ns - unmarshal_ns - server.total_ns);
}

int64_t AttendResult::SummedKernelNs() const {
  if (shard_server.empty()) return server.kernel_ns;
  int64_t sum = 0;
  for (const ServerTiming& shard : shard_server) sum += shard.kernel_ns;
  return sum;
}

}  // namespace attn
