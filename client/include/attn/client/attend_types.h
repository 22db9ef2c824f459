// attn/client/attend_types.h
//
// The values of one remote attention call: its inputs (AttentionInputs), its
// per-call options (AttendOptions) and its result (AttendResult), which
// carries the output tensor together with where the time went, on the
// server (ServerTiming, from the response) and in this client (ClientTiming).
//
// Tensors are raw little-endian 16-bit elements (fp16 or bf16) in
// [batch, seq_len, num_heads, head_dim] order, contiguous: the wire layout,
// so they travel without conversion. They are held in std::string, the type
// protobuf uses for `bytes`, so outputs move out of responses without a copy.
//
// The call is FlashAttention-2's flash_attn_func / flash_attn_varlen_func
// (attn/problem.h): K and V may have their own sequence length and head count
// (grouped-query attention), with causal and sliding-window masks aligned to
// the bottom right, the log-sum-exp as an optional second output, and packed
// variable-length sequences split by cu_seqlens.
#ifndef ATTN_CLIENT_ATTEND_TYPES_H_
#define ATTN_CLIENT_ATTEND_TYPES_H_

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "attn/dtype.h"
#include "attn/problem.h"
#include "attn/tensor.h"

namespace attn {

struct AttendOptions;

// A tensor that stays in a registered shared-memory region
// (AttentionClient::RegisterSystemRegion / RegisterCudaRegion) instead of
// travelling in the messages: bytes [offset, offset + byte_size) of the
// region, in the layout the inline tensor would have. Unset (empty
// region_id): the tensor is inline.
struct TensorRef {
  std::string region_id;  // RegionInfo.region_id from the registration
  int64_t offset = 0;     // a multiple of 16
  int64_t byte_size = 0;  // exactly the tensor's size
  bool set() const { return !region_id.empty(); }
};

// Q, K and V of one call and their geometry.
//
// Q (and the output O) is [batch, seq_len, num_heads, head_dim]; K and V are
// [batch, kv_seq_len, kv_num_heads, head_dim] (0 = Q's value). With varlen
// (cu_seqlens_q and cu_seqlens_k set, batch + 1 offsets each) the tensors are
// packed: Q/O [total_q, num_heads, head_dim], K/V [total_k, kv_num_heads,
// head_dim], where total_q = cu_seqlens_q.back(); shape.batch is the number
// of sequences and shape.seq_len / kv_seq_len the longest ones (FA2's
// max_seqlen_q / max_seqlen_k; 0 = derived from the offsets).
struct AttentionInputs {
  DType dtype = DType::kBFloat16;
  Shape shape;
  int64_t kv_seq_len = 0;    // 0: shape.seq_len
  int64_t kv_num_heads = 0;  // 0: shape.num_heads; must divide it
  std::vector<int32_t> cu_seqlens_q;  // varlen: both or neither
  std::vector<int32_t> cu_seqlens_k;
  std::string q;
  std::string k;
  std::string v;
  // Instead of q, k, v (left empty): tensors the caller owns, read in place
  // and sent without a copy. The caller keeps them alive and unchanged until
  // the call is over (Attend has returned; for AttendAsync, until `inputs`
  // is released). The C ABI and so the Python client pass NumPy arrays so.
  absl::string_view borrowed_q, borrowed_k, borrowed_v;
  // Instead of either: the tensor in a shared-memory region on the server's
  // host (q, k, v and borrowed_* left empty). Same-host servers started with
  // --allow_shared_memory only.
  TensorRef q_ref, k_ref, v_ref;

  // The tensors' bytes: the borrowed ones when set, else q, k, v.
  absl::string_view QData() const { return borrowed_q.data() != nullptr ? borrowed_q : q; }
  absl::string_view KData() const { return borrowed_k.data() != nullptr ? borrowed_k : k; }
  absl::string_view VData() const { return borrowed_v.data() != nullptr ? borrowed_v : v; }

  bool varlen() const { return !cu_seqlens_q.empty() || !cu_seqlens_k.empty(); }
  // The resolved K/V dimensions (and, with varlen, the longest sequences).
  int64_t SeqLenQ() const;
  int64_t SeqLenKv() const;
  int64_t NumHeadsKv() const { return kv_num_heads > 0 ? kv_num_heads : shape.num_heads; }
  // Tokens in memory: batch * seq_len, or the varlen totals.
  int64_t TokensQ() const;
  int64_t TokensKv() const;
  // Bytes of Q (and of the output O), and of K (and of V).
  int64_t QBytes() const;
  int64_t KvBytes() const;
  // Q + K + V.
  int64_t InputBytes() const { return QBytes() + 2 * KvBytes(); }
  // float32 LSE values of a call with return_lse: num_heads per query token.
  int64_t LseElements() const { return TokensQ() * shape.num_heads; }
  // True when K and V have Q's shape and there is no varlen: the seed's
  // self-attention request, encoded exactly as before the newer fields.
  bool IsSelfAttentionShape() const;

  // INVALID_ARGUMENT naming the field when a dimension is < 1, kv_num_heads
  // does not divide num_heads, the offsets are malformed, or a tensor's size
  // does not match.
  absl::Status Validate() const;

  // The call in the kernel library's terms, for FLOP counts and references.
  AttentionProblem Problem(const AttendOptions& options) const;
  // 4 * head_dim * num_heads * (visible query-key pairs): AttentionProblem::Flops
  // with the offsets when varlen.
  double Flops(const AttendOptions& options) const;
};

// Inputs drawn from N(0, 1) with a seeded generator and rounded to `dtype`
// (round to nearest even). The same seed gives the same tensors.
AttentionInputs MakeRandomInputs(const Shape& shape, DType dtype, uint64_t seed);

// The same for `geometry` (everything but q, k, v set): Q, then K, then V
// are drawn, so a self-attention geometry gives MakeRandomInputs' tensors.
AttentionInputs MakeRandomInputs(AttentionInputs geometry, uint64_t seed);

// The geometry (everything but the tensors) of a call on Q of `shape` and K,
// V of `kv_shape` (unset: Q's; its batch and head_dim must be Q's). With
// offsets (both or neither), the sequences are packed: batch and the longest
// lengths come from the offsets, the heads and head_dim from the shapes.
// INVALID_ARGUMENT naming what does not fit.
absl::StatusOr<AttentionInputs> MakeGeometry(const Shape& shape, DType dtype,
                                             const std::optional<Shape>& kv_shape,
                                             std::vector<int32_t> cu_seqlens_q = {},
                                             std::vector<int32_t> cu_seqlens_k = {});

// Offsets 0, l0, l0+l1, ... of sequences of `lengths` tokens (cu_seqlens).
std::vector<int32_t> CumulativeSeqlens(const std::vector<int64_t>& lengths);

// How Attend moves the tensors.
enum class Transport {
  kAuto,    // unary when the request fits the stream threshold, else streamed
  kUnary,   // always one Attend message each way
  kStream,  // always the chunked AttendStream RPC
};

struct AttendOptions {
  // Kernel to run (ListKernels). Empty: the server's default.
  std::string kernel;
  // Multiplies Q·Kᵀ before the softmax. Unset: 1/sqrt(head_dim).
  std::optional<float> softmax_scale;
  // Causal mask, aligned to the bottom right: query i sees keys
  // j <= i + kv_seq_len - seq_len (per sequence with varlen).
  bool causal = false;
  // Sliding window (FA2's window_size): query i sees keys j with
  // i + Skv - Sq - window_left <= j <= i + Skv - Sq + window_right; -1 leaves
  // that side unbounded (and is not sent).
  int64_t window_left = -1;
  int64_t window_right = -1;
  // Also return the log-sum-exp of each query row (AttendResult::lse).
  bool return_lse = false;
  // Write O (and, with return_lse, the LSE) into these regions instead of
  // the response (AttendResult::out / lse stay empty); see TensorRef.
  TensorRef out_ref;
  TensorRef lse_ref;
  // Echoed by the server and logged there. Empty: the server assigns one.
  std::string request_id;
  // Deadline of this call. Zero: ClientOptions::rpc_timeout.
  absl::Duration timeout = absl::ZeroDuration();
  Transport transport = Transport::kAuto;
  // False: never split this call over several connections
  // (ClientOptions::split_calls_above_bytes), e.g. to measure one
  // connection's throughput.
  bool allow_split = true;
  // Where to write O instead of AttendResult::out (which then stays
  // empty): inputs.QBytes() bytes the caller owns and keeps alive until the
  // call is over. Saves a copy of the output for callers that have their
  // own buffer (the C ABI: the caller's NumPy or torch array). Ignored when
  // out_ref is set.
  char* out_destination = nullptr;
};

// How a tensor travelled (proto TensorPath).
enum class TensorPath {
  kUnspecified,  // a server from before regions, or an output not asked for
  kInline,       // in the messages
  kSystemShm,    // a system shared-memory region
  kCudaIpc,      // a CUDA IPC region, read or written by the kernel in place
};
const char* TensorPathName(TensorPath path);  // "inline", "system_shm", ...

// The server's breakdown of one request (proto Timing), in nanoseconds. The
// parts are disjoint; total_ns also covers what they do not (OtherNs).
struct ServerTiming {
  int64_t receive_ns = 0;  // AttendStream: header to last input chunk (0 for unary)
  int64_t decode_ns = 0;   // validating the request and building the job
  int64_t queue_ns = 0;   // waiting for a worker
  int64_t h2d_ns = 0;     // staging and host-to-device copy (0 on the CPU backend)
  int64_t kernel_ns = 0;  // the attention kernel
  int64_t d2h_ns = 0;     // device-to-host copy (0 on the CPU backend)
  int64_t total_ns = 0;   // arrival to response ready
  // Requests that shared this one's kernel launch (server-side batching),
  // whose h2d, kernel and d2h times these are; 0 when it ran alone.
  int64_t batch_size = 0;
  TensorPath q_path = TensorPath::kUnspecified, k_path = TensorPath::kUnspecified,
             v_path = TensorPath::kUnspecified, out_path = TensorPath::kUnspecified,
             lse_path = TensorPath::kUnspecified;

  // total_ns minus the named parts (never negative).
  int64_t OtherNs() const;
};

// This client's side of one call, in nanoseconds.
struct ClientTiming {
  // Building the request message(s): header encoding and, when streaming,
  // copying the tensors into chunk messages. Unary requests reference the
  // caller's tensors without copying them, so this stays small.
  int64_t marshal_ns = 0;
  // Parsing the response and assembling the output tensor.
  int64_t unmarshal_ns = 0;
  // From the Attend call to the result being ready (everything).
  int64_t round_trip_ns = 0;
  // Streaming only: from the call's start until the last request chunk was
  // handed to the transport (0 for unary calls, where gRPC does not report
  // when the request left).
  int64_t upload_ns = 0;
  // True when the call went over AttendStream.
  bool streamed = false;
  // Unary calls this call was split into (ClientOptions::
  // split_calls_above_bytes), each on its own connection; 1: not split. A
  // split call's shards run side by side, so its figures are those of the
  // shard that answered last (AttendResult::last_shard), the one the call
  // waited for: ServerTiming is that shard's, marshal_ns runs from the
  // call's start until that shard's request went to gRPC (the gathers of
  // the shards built before it included), unmarshal_ns is parsing and
  // scattering that shard's response. So the rows partition the round trip
  // as an unsplit call's do. Every shard's own server figures are in
  // AttendResult::shard_server; kernel_tflops is the whole call's FLOPs
  // over the shards' summed kernel time.
  int shards = 1;

  // round_trip_ns minus client marshal/unmarshal and the server's total: the
  // network, gRPC's own (de)serialisation and waiting outside the server's
  // clock. Never negative.
  int64_t NetworkNs(const ServerTiming& server) const;
};

struct AttendResult {
  std::string request_id;
  DType dtype = DType::kBFloat16;
  Shape shape;
  std::string out;  // the output, same layout and size as q
  // With return_lse: log(sum_j exp(scale * q.k_j)) per query row, float32,
  // [batch, num_heads, seq_len] (varlen: [num_heads, total_q]); -inf for a
  // row that sees no key. Empty otherwise.
  std::vector<float> lse;
  ServerTiming server;
  ClientTiming client;
  std::string kernel;          // kernel that ran
  std::string backend;         // "cuda" or "cpu"
  std::string device;          // e.g. "NVIDIA H200 (cuda:0)"
  // As reported by the server; for a split call, its FLOPs over the
  // shards' summed kernel time (SummedKernelNs).
  double kernel_tflops = 0.0;
  // A split call (client.shards > 1): each shard's server breakdown, in
  // shard order, and the index of the shard that answered last, whose
  // breakdown `server` is. Empty (and 0) when the call was not split.
  std::vector<ServerTiming> shard_server;
  int last_shard = 0;

  // The kernel time of the whole problem: server.kernel_ns, or for a split
  // call the sum over its shards.
  int64_t SummedKernelNs() const;
};

}  // namespace attn

#endif  // ATTN_CLIENT_ATTEND_TYPES_H_
