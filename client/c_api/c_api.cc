// The client's C ABI (attn/client/c_api.h) over attn::AttentionClient.
#include "attn/client/c_api.h"

#include <algorithm>
#include <chrono>
#include <cstddef>
#include <cstdlib>
#include <cstring>
#include <initializer_list>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/time/time.h"
#include "attn/c_boundary.h"
#include "attn/client/attention_client.h"
#include "google/protobuf/message_lite.h"

struct attn_client {
  std::unique_ptr<attn::AttentionClient> client;
};

namespace {

using ::attn::ReportToC;

// The defaults attn_client_options_init hands out; static so that its
// address string outlives the call.
const attn::ClientOptions& Defaults() {
  static const attn::ClientOptions* const defaults = new attn::ClientOptions();
  return *defaults;
}

std::string OrEmpty(const char* text) { return text == nullptr ? std::string() : text; }

int64_t NowNs() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

template <size_t N>
void CopyString(const std::string& from, char (&to)[N]) {
  const size_t n = std::min(from.size(), N - 1);
  std::memcpy(to, from.data(), n);
  to[n] = '\0';
}

// Bytes of a tensor of 16-bit elements with these dimensions, or 0 when a
// dimension is < 1 or the product overflows: then nothing is read from the
// caller, and AttentionInputs::Validate names the dimension.
int64_t TensorBytes(std::initializer_list<int64_t> dims) {
  int64_t bytes = 2;
  for (const int64_t d : dims) {
    if (d < 1 || __builtin_mul_overflow(bytes, d, &bytes)) return 0;
  }
  return bytes;
}

// Points `tensor` at `bytes` of the caller's `data`, read in place: the
// call is synchronous (AttentionClient::Attend returns only once gRPC holds
// no reference to the inputs), so the caller's memory outlives every read
// and the library copies no input.
absl::Status Borrow(const char* name, const void* data, int64_t bytes, absl::string_view* tensor) {
  if (bytes == 0) return absl::OkStatus();
  if (data == nullptr) return absl::InvalidArgumentError(absl::StrCat(name, " is NULL"));
  *tensor = absl::string_view(static_cast<const char*>(data), static_cast<size_t>(bytes));
  return absl::OkStatus();
}

// With varlen the caller states its token count; reading total * heads *
// head_dim elements is safe only if the offsets end there too.
absl::Status CopyOffsets(const char* name, const int32_t* offsets, int64_t batch,
                         const char* total_name, int64_t total, std::vector<int32_t>* to) {
  if (offsets == nullptr || batch < 1) return absl::OkStatus();  // Validate names it
  to->assign(offsets, offsets + batch + 1);
  if (to->back() != total) {
    return absl::InvalidArgumentError(absl::StrCat(name, " ends at ", to->back(), " but ",
                                                   total_name, " is ", total,
                                                   ": the offsets must end at the packed tokens"));
  }
  return absl::OkStatus();
}

// A reference as the C++ client takes it; unset when region_id is NULL or "".
attn::TensorRef RefFromC(const attn_client_tensor_ref_t& ref) {
  return attn::TensorRef{OrEmpty(ref.region_id), ref.offset, ref.byte_size};
}

// Points `tensor` at the caller's `data`, or `ref` at its region: one of them.
absl::Status BorrowOrRefer(const char* name, const void* data, int64_t bytes,
                           const attn_client_tensor_ref_t* ref, absl::string_view* tensor,
                           attn::TensorRef* to) {
  if (ref != nullptr) *to = RefFromC(*ref);
  if (!to->set()) return Borrow(name, data, bytes, tensor);
  if (data != nullptr) {
    return absl::InvalidArgumentError(absl::StrCat(name, " and refs->", name,
                                                   " are both set; give ", name,
                                                   " inline or by reference (", name, " NULL)"));
  }
  return absl::OkStatus();
}

// The call's inputs, borrowed from the caller's buffers once their geometry
// is known to be readable, or named by `refs` (may be null).
absl::StatusOr<attn::AttentionInputs> Inputs(int dtype, const void* q, const void* k, const void* v,
                                             const int32_t* cu_seqlens_q,
                                             const int32_t* cu_seqlens_k, int64_t batch,
                                             int64_t seqlen_q, int64_t seqlen_k, int64_t heads_q,
                                             int64_t heads_kv, int64_t head_dim, int64_t total_q,
                                             int64_t total_k,
                                             const attn_client_tensor_refs_t* refs) {
  absl::StatusOr<attn::DType> type = attn::DTypeFromC(dtype);
  if (!type.ok()) return type.status();
  attn::AttentionInputs in;
  in.dtype = *type;
  in.shape = attn::Shape{batch, seqlen_q, heads_q, head_dim};
  in.kv_seq_len = seqlen_k;
  in.kv_num_heads = heads_kv;
  int64_t q_bytes = 0;
  int64_t kv_bytes = 0;
  if (cu_seqlens_q != nullptr || cu_seqlens_k != nullptr) {
    if (absl::Status s =
            CopyOffsets("cu_seqlens_q", cu_seqlens_q, batch, "total_q", total_q, &in.cu_seqlens_q);
        !s.ok()) {
      return s;
    }
    if (absl::Status s =
            CopyOffsets("cu_seqlens_k", cu_seqlens_k, batch, "total_k", total_k, &in.cu_seqlens_k);
        !s.ok()) {
      return s;
    }
    q_bytes = TensorBytes({total_q, heads_q, head_dim});
    kv_bytes = TensorBytes({total_k, in.NumHeadsKv(), head_dim});
  } else {
    q_bytes = TensorBytes({batch, seqlen_q, heads_q, head_dim});
    kv_bytes = TensorBytes({batch, in.SeqLenKv(), in.NumHeadsKv(), head_dim});
  }
  const bool by_ref = refs != nullptr;
  if (absl::Status s =
          BorrowOrRefer("q", q, q_bytes, by_ref ? &refs->q : nullptr, &in.borrowed_q, &in.q_ref);
      !s.ok()) {
    return s;
  }
  if (absl::Status s =
          BorrowOrRefer("k", k, kv_bytes, by_ref ? &refs->k : nullptr, &in.borrowed_k, &in.k_ref);
      !s.ok()) {
    return s;
  }
  if (absl::Status s =
          BorrowOrRefer("v", v, kv_bytes, by_ref ? &refs->v : nullptr, &in.borrowed_v, &in.v_ref);
      !s.ok()) {
    return s;
  }
  if (absl::Status s = in.Validate(); !s.ok()) return s;
  return in;
}

absl::StatusOr<attn::Transport> TransportFromC(int transport) {
  switch (transport) {
    case ATTN_TRANSPORT_AUTO:
      return attn::Transport::kAuto;
    case ATTN_TRANSPORT_UNARY:
      return attn::Transport::kUnary;
    case ATTN_TRANSPORT_STREAM:
      return attn::Transport::kStream;
    default:
      return absl::InvalidArgumentError(
          absl::StrCat("transport is ", transport,
                       "; it must be ATTN_TRANSPORT_AUTO (0), ATTN_TRANSPORT_UNARY (1) or "
                       "ATTN_TRANSPORT_STREAM (2)"));
  }
}

void FillTiming(const attn::AttendResult& r, int64_t copy_in_ns, int64_t copy_out_ns,
                int64_t round_trip_ns, attn_client_timing_t* t) {
  *t = attn_client_timing_t{};
  t->receive_ns = r.server.receive_ns;
  t->decode_ns = r.server.decode_ns;
  t->queue_ns = r.server.queue_ns;
  t->h2d_ns = r.server.h2d_ns;
  t->kernel_ns = r.server.kernel_ns;
  t->d2h_ns = r.server.d2h_ns;
  t->total_ns = r.server.total_ns;
  t->marshal_ns = r.client.marshal_ns + copy_in_ns;
  t->unmarshal_ns = r.client.unmarshal_ns + copy_out_ns;
  t->round_trip_ns = round_trip_ns;
  t->upload_ns = r.client.upload_ns;
  t->streamed = r.client.streamed ? 1 : 0;
  t->kernel_tflops = r.kernel_tflops;
  CopyString(r.request_id, t->request_id);
  CopyString(r.kernel, t->kernel);
  CopyString(r.backend, t->backend);
  CopyString(r.device, t->device);
}

int Serialized(const absl::StatusOr<std::string>& bytes, attn_client_buffer_t* message, char* error,
               size_t error_size) {
  if (message == nullptr) {
    return ReportToC(absl::InvalidArgumentError("message is NULL"), error, error_size);
  }
  *message = attn_client_buffer_t{};
  if (!bytes.ok()) return ReportToC(bytes.status(), error, error_size);
  // malloc(0) may return NULL; one byte keeps "data != NULL" meaning success.
  message->data = std::malloc(std::max<size_t>(bytes->size(), 1));
  if (message->data == nullptr) {
    return ReportToC(absl::ResourceExhaustedError("out of memory"), error, error_size);
  }
  std::memcpy(message->data, bytes->data(), bytes->size());
  message->size = bytes->size();
  return 0;
}

template <typename T>
absl::StatusOr<std::string> SerializeResult(absl::StatusOr<T> message) {
  if (!message.ok()) return message.status();
  return message->SerializeAsString();
}

absl::Status NullClient() { return absl::InvalidArgumentError("client is NULL"); }

// 0 for OK (leaving `error` as it was), else ReportToC.
int Report(const absl::Status& status, char* error, size_t error_size) {
  return status.ok() ? 0 : ReportToC(status, error, error_size);
}

// Structs that start with struct_size: fields are only ever appended, so a
// caller's struct is usable when it reaches the end of the first version's
// fields; a larger (newer) one is read up to what this library knows.
constexpr size_t kRefsFirstVersionBytes =
    offsetof(attn_client_tensor_refs_t, lse) + sizeof(attn_client_tensor_ref_t);
constexpr size_t kPathsFirstVersionBytes = offsetof(attn_client_tensor_paths_t, lse) + sizeof(int);

absl::Status CheckStructSize(const char* name, size_t given, size_t needed, const char* type) {
  if (given >= needed) return absl::OkStatus();
  return absl::InvalidArgumentError(absl::StrCat(name, "->struct_size is ", given,
                                                 "; it must be at least ", needed,
                                                 " (set it to sizeof(", type, "))"));
}

int PathToC(attn::TensorPath path) {
  switch (path) {
    case attn::TensorPath::kUnspecified:
      return ATTN_TENSOR_PATH_UNSPECIFIED;
    case attn::TensorPath::kInline:
      return ATTN_TENSOR_PATH_INLINE;
    case attn::TensorPath::kSystemShm:
      return ATTN_TENSOR_PATH_SYSTEM_SHM;
    case attn::TensorPath::kCudaIpc:
      return ATTN_TENSOR_PATH_CUDA_IPC;
  }
  return ATTN_TENSOR_PATH_UNSPECIFIED;
}

void FillPaths(const attn::ServerTiming& server, attn_client_tensor_paths_t* paths) {
  attn_client_tensor_paths_t all{};
  all.struct_size = paths->struct_size;
  all.q = PathToC(server.q_path);
  all.k = PathToC(server.k_path);
  all.v = PathToC(server.v_path);
  all.out = PathToC(server.out_path);
  all.lse = PathToC(server.lse_path);
  std::memcpy(paths, &all, std::min(paths->struct_size, sizeof(all)));
}

// attn_client_attend and attn_client_attend_refs; `refs` (the caller's,
// checked and copied) and `paths` may be null.
absl::Status Attend(attn_client_t* client, const char* kernel, int dtype, const void* q,
                    const void* k, const void* v, void* out, float* lse,
                    const int32_t* cu_seqlens_q, const int32_t* cu_seqlens_k, int64_t batch,
                    int64_t seqlen_q, int64_t seqlen_k, int64_t heads_q, int64_t heads_kv,
                    int64_t head_dim, int causal, int64_t window_left, int64_t window_right,
                    float softmax_scale, int64_t total_q, int64_t total_k, double timeout_s,
                    int transport, const char* request_id, const attn_client_tensor_refs_t* refs,
                    attn_client_timing_t* timing, attn_client_tensor_paths_t* paths) {
  const int64_t start = NowNs();
  if (client == nullptr) return NullClient();
  const attn::TensorRef out_ref = refs != nullptr ? RefFromC(refs->out) : attn::TensorRef{};
  const attn::TensorRef lse_ref = refs != nullptr ? RefFromC(refs->lse) : attn::TensorRef{};
  if (out_ref.set() && out != nullptr) {
    return absl::InvalidArgumentError(
        "out and refs->out are both set; the output goes to one (out NULL)");
  }
  if (!out_ref.set() && out == nullptr) {
    return absl::InvalidArgumentError(refs != nullptr ? "out is NULL and refs->out is unset"
                                                      : "out is NULL");
  }
  if (lse_ref.set() && lse != nullptr) {
    return absl::InvalidArgumentError(
        "lse and refs->lse are both set; the LSE goes to one (lse NULL)");
  }
  absl::StatusOr<attn::AttentionInputs> in =
      Inputs(dtype, q, k, v, cu_seqlens_q, cu_seqlens_k, batch, seqlen_q, seqlen_k, heads_q,
             heads_kv, head_dim, total_q, total_k, refs);
  if (!in.ok()) return in.status();
  attn::AttendOptions options;
  absl::StatusOr<attn::Transport> how = TransportFromC(transport);
  if (!how.ok()) return how.status();
  options.transport = *how;
  options.kernel = OrEmpty(kernel);
  if (softmax_scale != 0.0f) options.softmax_scale = softmax_scale;
  options.causal = causal != 0;
  options.window_left = window_left;
  options.window_right = window_right;
  options.return_lse = lse != nullptr || lse_ref.set();
  options.out_ref = out_ref;
  options.lse_ref = lse_ref;
  options.request_id = OrEmpty(request_id);
  // The C++ client reads a timeout <= 0 as "the default"; a negative one is
  // a deadline already past, as in gRPC: the call fails without being sent.
  if (timeout_s < 0) {
    return absl::DeadlineExceededError(
        absl::StrCat("Attend to ", client->client->options().address,
                     ": the deadline passed before the call (timeout_s is ", timeout_s, ")"));
  }
  options.timeout = absl::Seconds(timeout_s);
  // O straight into the caller's buffer (no copy out of the result).
  options.out_destination = static_cast<char*>(out);
  const int64_t copied_in = NowNs();

  absl::StatusOr<attn::AttendResult> result = client->client->Attend(*in, options);
  if (!result.ok()) return result.status();

  const int64_t copy_out_start = NowNs();
  // An LSE written to a region is not in the response.
  const size_t lse_bytes = lse != nullptr ? in->LseElements() * sizeof(float) : 0;
  // The client checked O's size and wrote it to `out` (out_destination).
  if (!result->out.empty() || result->lse.size() * sizeof(float) != lse_bytes) {
    return absl::InternalError(
        absl::StrCat("Attend to ", client->client->options().address, ": the response has ",
                     result->out.size(), " output bytes besides `out` and ",
                     result->lse.size() * sizeof(float), " LSE bytes; the request needs 0 and ",
                     lse_bytes));
  }
  if (lse_bytes > 0) std::memcpy(lse, result->lse.data(), lse_bytes);
  const int64_t end = NowNs();
  if (timing != nullptr) {
    FillTiming(*result, copied_in - start, end - copy_out_start, end - start, timing);
  }
  if (paths != nullptr) FillPaths(result->server, paths);
  return absl::OkStatus();
}

// Registers through `register_region` and writes the region's id.
template <typename Register>
int RegisterRegion(attn_client_t* client, const char* name, char* region_id, size_t region_id_size,
                   char* error, size_t error_size, Register register_region) {
  if (client == nullptr) return ReportToC(NullClient(), error, error_size);
  if (region_id == nullptr || region_id_size < ATTN_CLIENT_REGION_ID_BYTES) {
    return ReportToC(
        absl::InvalidArgumentError(absl::StrCat(
            "region_id must hold ATTN_CLIENT_REGION_ID_BYTES (", ATTN_CLIENT_REGION_ID_BYTES,
            ") bytes; region_id_size is ", region_id == nullptr ? 0 : region_id_size)),
        error, error_size);
  }
  absl::StatusOr<attnserve::v1::RegionInfo> info = register_region(OrEmpty(name));
  if (!info.ok()) return ReportToC(info.status(), error, error_size);
  const std::string& id = info->region_id();
  if (id.size() >= region_id_size) {
    // Not usable by the caller: take it back rather than leave it registered.
    (void)client->client->UnregisterRegion(OrEmpty(name));
    return ReportToC(
        absl::InternalError(absl::StrCat("the server's region id has ", id.size(),
                                         " bytes; region_id holds ", region_id_size - 1)),
        error, error_size);
  }
  std::memcpy(region_id, id.data(), id.size());
  region_id[id.size()] = '\0';
  return 0;
}


}  // namespace

extern "C" void attn_client_options_init(attn_client_options_t* options) {
  if (options == nullptr) return;
  const attn::ClientOptions& d = Defaults();
  *options = attn_client_options_t{};
  options->address = d.address.c_str();
  options->connect_timeout_s = absl::ToDoubleSeconds(d.connect_timeout);
  options->rpc_timeout_s = absl::ToDoubleSeconds(d.rpc_timeout);
  options->max_message_bytes = d.max_receive_message_bytes;
  options->stream_threshold_bytes = d.stream_threshold_bytes;
  options->stream_chunk_bytes = d.stream_chunk_bytes;
  options->fetch_server_info = d.fetch_server_info ? 1 : 0;
  options->dedicated_connection = d.dedicated_connection ? 1 : 0;
}

extern "C" int attn_client_connect(const attn_client_options_t* options, attn_client_t** client,
                                   char* error, size_t error_size) {
  if (options == nullptr || client == nullptr) {
    return ReportToC(absl::InvalidArgumentError("options and client must not be NULL"), error,
                     error_size);
  }
  *client = nullptr;
  attn::ClientOptions o;
  if (options->address != nullptr && options->address[0] != '\0') o.address = options->address;
  o.connect_timeout = absl::Seconds(options->connect_timeout_s);
  o.rpc_timeout = absl::Seconds(options->rpc_timeout_s);  // < 0: a deadline already past
  o.max_receive_message_bytes = options->max_message_bytes;
  o.max_send_message_bytes = options->max_message_bytes;
  o.stream_threshold_bytes = options->stream_threshold_bytes;
  o.stream_chunk_bytes = options->stream_chunk_bytes;
  o.fetch_server_info = options->fetch_server_info != 0;
  o.dedicated_connection = options->dedicated_connection != 0;
  o.load_balancing_policy = OrEmpty(options->load_balancing_policy);
  o.tls.enabled = options->tls != 0;
  o.tls.root_certs_path = OrEmpty(options->tls_root_certs_path);
  o.tls.cert_chain_path = OrEmpty(options->tls_cert_chain_path);
  o.tls.private_key_path = OrEmpty(options->tls_private_key_path);
  o.tls.server_name_override = OrEmpty(options->tls_server_name);
  if (options->metadata_pairs > 0 && options->metadata == nullptr) {
    return ReportToC(absl::InvalidArgumentError("metadata is NULL but metadata_pairs is not 0"),
                     error, error_size);
  }
  for (size_t i = 0; i < options->metadata_pairs; ++i) {
    o.metadata.emplace_back(OrEmpty(options->metadata[2 * i]),
                            OrEmpty(options->metadata[2 * i + 1]));
  }
  absl::StatusOr<std::unique_ptr<attn::AttentionClient>> connected =
      attn::AttentionClient::Connect(o);
  if (!connected.ok()) return ReportToC(connected.status(), error, error_size);
  *client = new attn_client{std::move(*connected)};
  return 0;
}

extern "C" void attn_client_close(attn_client_t* client) { delete client; }

extern "C" int attn_client_attend(
    attn_client_t* client, const char* kernel, int dtype, const void* q, const void* k,
    const void* v, void* out, float* lse, const int32_t* cu_seqlens_q, const int32_t* cu_seqlens_k,
    int64_t batch, int64_t seqlen_q, int64_t seqlen_k, int64_t heads_q, int64_t heads_kv,
    int64_t head_dim, int causal, int64_t window_left, int64_t window_right, float softmax_scale,
    int64_t total_q, int64_t total_k, double timeout_s, int transport, const char* request_id,
    attn_client_timing_t* timing, char* error, size_t error_size) {
  return Report(Attend(client, kernel, dtype, q, k, v, out, lse, cu_seqlens_q, cu_seqlens_k, batch,
                       seqlen_q, seqlen_k, heads_q, heads_kv, head_dim, causal, window_left,
                       window_right, softmax_scale, total_q, total_k, timeout_s, transport,
                       request_id, /*refs=*/nullptr, timing, /*paths=*/nullptr),
                error, error_size);
}

extern "C" int attn_client_attend_refs(
    attn_client_t* client, const char* kernel, int dtype, const void* q, const void* k,
    const void* v, void* out, float* lse, const int32_t* cu_seqlens_q, const int32_t* cu_seqlens_k,
    int64_t batch, int64_t seqlen_q, int64_t seqlen_k, int64_t heads_q, int64_t heads_kv,
    int64_t head_dim, int causal, int64_t window_left, int64_t window_right, float softmax_scale,
    int64_t total_q, int64_t total_k, double timeout_s, int transport, const char* request_id,
    const attn_client_tensor_refs_t* refs, attn_client_timing_t* timing,
    attn_client_tensor_paths_t* paths, char* error, size_t error_size) {
  attn_client_tensor_refs_t known{};
  if (refs != nullptr) {
    if (absl::Status s = CheckStructSize("refs", refs->struct_size, kRefsFirstVersionBytes,
                                         "attn_client_tensor_refs_t");
        !s.ok()) {
      return ReportToC(s, error, error_size);
    }
    std::memcpy(&known, refs, std::min(refs->struct_size, sizeof(known)));
  }
  if (paths != nullptr) {
    if (absl::Status s = CheckStructSize("paths", paths->struct_size, kPathsFirstVersionBytes,
                                         "attn_client_tensor_paths_t");
        !s.ok()) {
      return ReportToC(s, error, error_size);
    }
  }
  return Report(Attend(client, kernel, dtype, q, k, v, out, lse, cu_seqlens_q, cu_seqlens_k, batch,
                       seqlen_q, seqlen_k, heads_q, heads_kv, head_dim, causal, window_left,
                       window_right, softmax_scale, total_q, total_k, timeout_s, transport,
                       request_id, refs != nullptr ? &known : nullptr, timing, paths),
                error, error_size);
}

extern "C" int attn_client_register_system_region(attn_client_t* client, const char* name,
                                                  const char* shm_name, int64_t offset,
                                                  int64_t byte_size, char* region_id,
                                                  size_t region_id_size, char* error,
                                                  size_t error_size) {
  return RegisterRegion(client, name, region_id, region_id_size, error, error_size,
                        [&](const std::string& region_name) {
                          return client->client->RegisterSystemRegion(
                              region_name, OrEmpty(shm_name), offset, byte_size);
                        });
}

extern "C" int attn_client_register_cuda_region(attn_client_t* client, const char* name,
                                                const void* ipc_handle, int device, int64_t offset,
                                                int64_t byte_size, char* region_id,
                                                size_t region_id_size, char* error,
                                                size_t error_size) {
  if (ipc_handle == nullptr) {
    return ReportToC(absl::InvalidArgumentError("ipc_handle is NULL"), error, error_size);
  }
  return RegisterRegion(
      client, name, region_id, region_id_size, error, error_size,
      [&](const std::string& region_name) {
        return client->client->RegisterCudaRegion(
            region_name,
            std::string(static_cast<const char*>(ipc_handle), ATTN_CLIENT_CUDA_IPC_HANDLE_BYTES),
            device, offset, byte_size);
      });
}

extern "C" int attn_client_unregister_region(attn_client_t* client, const char* name, char* error,
                                             size_t error_size) {
  if (client == nullptr) return ReportToC(NullClient(), error, error_size);
  return Report(client->client->UnregisterRegion(OrEmpty(name)), error, error_size);
}

extern "C" int attn_client_list_regions(attn_client_t* client, attn_client_buffer_t* message,
                                        char* error, size_t error_size) {
  if (client == nullptr) return ReportToC(NullClient(), error, error_size);
  absl::StatusOr<std::vector<attnserve::v1::RegionInfo>> regions = client->client->ListRegions();
  if (!regions.ok()) return Serialized(regions.status(), message, error, error_size);
  attnserve::v1::ListRegionsResponse response;
  for (attnserve::v1::RegionInfo& region : *regions) *response.add_regions() = std::move(region);
  return Serialized(response.SerializeAsString(), message, error, error_size);
}

extern "C" int attn_client_health(attn_client_t* client, const char* service, int* status,
                                  char* error, size_t error_size) {
  if (client == nullptr) return ReportToC(NullClient(), error, error_size);
  if (status == nullptr) {
    return ReportToC(absl::InvalidArgumentError("status is NULL"), error, error_size);
  }
  absl::StatusOr<attn::HealthStatus> health = client->client->CheckHealth(OrEmpty(service));
  if (!health.ok()) return ReportToC(health.status(), error, error_size);
  *status = static_cast<int>(*health);
  return 0;
}

extern "C" int64_t attn_client_stream_threshold_bytes(const attn_client_t* client) {
  return client == nullptr ? 0 : client->client->stream_threshold_bytes();
}

extern "C" void attn_client_buffer_free(attn_client_buffer_t* buffer) {
  if (buffer == nullptr) return;
  std::free(buffer->data);
  *buffer = attn_client_buffer_t{};
}

extern "C" int attn_client_server_info(attn_client_t* client, attn_client_buffer_t* message,
                                       char* error, size_t error_size) {
  if (client == nullptr) return ReportToC(NullClient(), error, error_size);
  const std::optional<attnserve::v1::ServerInfo>& info = client->client->server_info();
  if (!info.has_value()) {
    return Serialized(absl::NotFoundError("no server info: the client connected with "
                                          "fetch_server_info = 0"),
                      message, error, error_size);
  }
  return Serialized(info->SerializeAsString(), message, error, error_size);
}

extern "C" int attn_client_list_kernels(attn_client_t* client, attn_client_buffer_t* message,
                                        char* error, size_t error_size) {
  if (client == nullptr) return ReportToC(NullClient(), error, error_size);
  return Serialized(SerializeResult(client->client->ListKernels()), message, error, error_size);
}

extern "C" int attn_client_stats(attn_client_t* client, attn_client_buffer_t* message, char* error,
                                 size_t error_size) {
  if (client == nullptr) return ReportToC(NullClient(), error, error_size);
  return Serialized(SerializeResult(client->client->GetStats()), message, error, error_size);
}
