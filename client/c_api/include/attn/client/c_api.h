/* attn/client/c_api.h
 *
 * C ABI of the attnserve client (shared library libattn_client_c.so), over
 * attn::AttentionClient (attn/client/attention_client.h), for callers
 * outside C++: the Python package (attnserve_client) loads it with ctypes,
 * which releases the GIL during each call, so Python threads sharing one
 * handle run their calls in parallel here, at the C++ client's speed.
 *
 * Conventions are the kernel library's (attn/c_api.h): tensors are
 * contiguous 16-bit arrays, [batch, seq_len, num_heads, head_dim] (packed
 * [total, num_heads, head_dim] with varlen); dtypes are attn/c_dtype.h's;
 * every function returning int returns 0 on success or a gRPC status code
 * (3 INVALID_ARGUMENT, 4 DEADLINE_EXCEEDED, 14 UNAVAILABLE, ...: the
 * server's code passes through) and, if `error` is not NULL, writes a
 * NUL-terminated message of at most `error_size` bytes there. No C++ type
 * crosses: a client is an opaque handle.
 *
 * Thread-safety: one handle may be used by any number of threads at once,
 * except attn_client_close, which must come after every other call on it
 * has returned.
 *
 * Copies: none of the inputs. They are read in place from the caller's
 * memory (attn::AttentionInputs::borrowed_*) and gRPC sends from there; the
 * call returns only once gRPC holds no reference to them. The output (and
 * LSE) is copied once from the parsed response into the caller's `out` (and
 * `lse`).
 */
#ifndef ATTN_CLIENT_C_API_H_
#define ATTN_CLIENT_C_API_H_

#include <stddef.h>
#include <stdint.h>

#include "attn/c_dtype.h" /* ATTN_DTYPE_FLOAT16, ATTN_DTYPE_BFLOAT16 */

/* The library is built with hidden visibility: only what is marked here is
 * exported. */
#if defined(__GNUC__)
#define ATTN_CLIENT_C_API __attribute__((visibility("default")))
#else
#define ATTN_CLIENT_C_API
#endif

#ifdef __cplusplus
extern "C" {
#endif

/* An open connection to one server (attn::AttentionClient). */
typedef struct attn_client attn_client_t;

/* How to connect (attn::ClientOptions). Fill it with attn_client_options_init,
 * which writes the C++ client's defaults, then change what you need. Strings
 * are read during attn_client_connect only; NULL or "" leaves a field unset. */
typedef struct {
  const char* address;               /* "host:port" or any gRPC target */
  double connect_timeout_s;          /* UNAVAILABLE when not ready by then */
  double rpc_timeout_s;              /* deadline of calls that set none */
  int64_t max_message_bytes;         /* send and receive limit; -1 unlimited */
  int64_t stream_threshold_bytes;    /* 0: the server's max_message_bytes */
  int64_t stream_chunk_bytes;        /* payload per AttendStream chunk */
  int fetch_server_info;             /* 0: skip GetServerInfo at connect */
  int dedicated_connection;          /* 1: a TCP connection of its own */
  const char* load_balancing_policy; /* e.g. "round_robin" */
  int tls;                           /* 1: TLS with the files below */
  const char* tls_root_certs_path;   /* PEM; NULL: gRPC's default roots */
  const char* tls_cert_chain_path;   /* mutual TLS: both or neither */
  const char* tls_private_key_path;
  const char* tls_server_name; /* name expected in the certificate */
  const char* const* metadata; /* key0, value0, key1, value1, ... */
  size_t metadata_pairs;       /* number of (key, value) pairs */
} attn_client_options_t;

/* The defaults of attn::ClientOptions, address "localhost:50051". */
ATTN_CLIENT_C_API void attn_client_options_init(attn_client_options_t* options);

/* Connects (attn::AttentionClient::Connect) and stores the handle in
 * *client. UNAVAILABLE naming the address when nothing answers within
 * connect_timeout_s; INVALID_ARGUMENT for unusable options. */
ATTN_CLIENT_C_API int attn_client_connect(const attn_client_options_t* options,
                                          attn_client_t** client, char* error, size_t error_size);

/* Closes the connection and frees the handle; NULL is a no-op. */
ATTN_CLIENT_C_API void attn_client_close(attn_client_t* client);

/* Where one call's time went, in nanoseconds (attn::ServerTiming and
 * attn::ClientTiming). marshal_ns includes this library's setup of the inputs,
 * unmarshal_ns its copy of the output into the caller's buffers, and
 * round_trip_ns is the whole attn_client_attend call. Strings are
 * NUL-terminated, truncated to their arrays. */
typedef struct {
  int64_t receive_ns, decode_ns, queue_ns, h2d_ns, kernel_ns, d2h_ns, total_ns; /* server */
  int64_t marshal_ns, unmarshal_ns, round_trip_ns, upload_ns;                   /* client */
  int streamed;         /* 1: the call went over AttendStream */
  double kernel_tflops; /* as the server reported it */
  char request_id[64];
  char kernel[64];
  char backend[16];
  char device[128];
} attn_client_timing_t;

/* How the tensors travel (attn::Transport). */
enum {
  ATTN_TRANSPORT_AUTO = 0, /* unary when the request fits the threshold, else streamed */
  ATTN_TRANSPORT_UNARY = 1,
  ATTN_TRANSPORT_STREAM = 2
};

/* Remote attention, FlashAttention-2's flash_attn_func / flash_attn_varlen_func,
 * with attn_forward_ex's arguments (attn/c_api.h) on host memory:
 *   q, out  [batch, seqlen_q, heads_q, head_dim]
 *   k, v    [batch, seqlen_k, heads_kv, head_dim]
 * or, with varlen (cu_seqlens_q and cu_seqlens_k not NULL, batch + 1 int32
 * offsets each, host memory), packed
 *   q, out  [total_q, heads_q, head_dim],  k, v  [total_k, heads_kv, head_dim]
 * where total_q / total_k are the caller's token counts (they must equal
 * the last offsets) and seqlen_q / seqlen_k the longest sequences (0: derived
 * from the offsets); total_q / total_k are ignored without varlen.
 *   kernel: a name from the server's ListKernels; NULL or "": its default;
 *   causal, window_left / window_right (-1 unbounded), softmax_scale (0:
 *     1/sqrt(head_dim)): as in attn_forward_ex;
 *   lse: NULL, or float32 [batch, heads_q, seqlen_q] (varlen [heads_q,
 *     total_q]) receiving the log-sum-exp of each query row (-inf where a row
 *     sees no key);
 *   timeout_s: the call's deadline; 0: the client's rpc_timeout_s; negative:
 *     already past (DEADLINE_EXCEEDED), as is a negative rpc_timeout_s;
 *   transport: ATTN_TRANSPORT_*;
 *   request_id: NULL or "": the server assigns one;
 *   timing: NULL, or receives the breakdown.
 * The buffers are read (q, k, v) and written (out, lse) only during the call.
 * Bad geometry is INVALID_ARGUMENT naming the field, before anything is sent;
 * the server's refusals come back with its code and message. */
ATTN_CLIENT_C_API int attn_client_attend(
    attn_client_t* client, const char* kernel, int dtype, const void* q, const void* k,
    const void* v, void* out, float* lse, const int32_t* cu_seqlens_q, const int32_t* cu_seqlens_k,
    int64_t batch, int64_t seqlen_q, int64_t seqlen_k, int64_t heads_q, int64_t heads_kv,
    int64_t head_dim, int causal, int64_t window_left, int64_t window_right, float softmax_scale,
    int64_t total_q, int64_t total_k, double timeout_s, int transport, const char* request_id,
    attn_client_timing_t* timing, char* error, size_t error_size);

/* grpc.health.v1 Check of `service` (NULL or "": the whole server); on
 * success *status is the answer: 0 UNKNOWN, 1 SERVING, 2 NOT_SERVING,
 * 3 SERVICE_UNKNOWN. */
ATTN_CLIENT_C_API int attn_client_health(attn_client_t* client, const char* service, int* status,
                                         char* error, size_t error_size);

/* Requests whose encoded size exceeds this many bytes are streamed. */
ATTN_CLIENT_C_API int64_t attn_client_stream_threshold_bytes(const attn_client_t* client);

/* Bytes allocated by this library (serialized protobuf messages); free them
 * with attn_client_buffer_free. */
typedef struct {
  void* data;
  size_t size;
} attn_client_buffer_t;

ATTN_CLIENT_C_API void attn_client_buffer_free(attn_client_buffer_t* buffer);

/* The server's messages, serialized (proto/attnserve/v1/attention.proto),
 * into *message:
 *   attn_client_server_info   ServerInfo fetched at connect (NOT_FOUND when
 *                             fetch_server_info was 0)
 *   attn_client_list_kernels  ListKernelsResponse
 *   attn_client_stats         ServerStats */
ATTN_CLIENT_C_API int attn_client_server_info(attn_client_t* client, attn_client_buffer_t* message,
                                              char* error, size_t error_size);
ATTN_CLIENT_C_API int attn_client_list_kernels(attn_client_t* client, attn_client_buffer_t* message,
                                               char* error, size_t error_size);
ATTN_CLIENT_C_API int attn_client_stats(attn_client_t* client, attn_client_buffer_t* message,
                                        char* error, size_t error_size);

/* --- Same-host shared memory (attention.proto's HoldRegions) -------------
 *
 * With a server started with --allow_shared_memory and reached over a unix
 * socket or loopback, tensors can stay in memory both processes map and be
 * named by reference instead of travelling in messages
 * (attn::AttentionClient::RegisterSystemRegion, RegisterCudaRegion,
 * UnregisterRegion, ListRegions). Regions belong to the handle's lease,
 * opened by its first registration; attn_client_close ends the lease and
 * the server unregisters them all.
 *
 * Added after the functions above, which are unchanged: a caller of the
 * older ABI is unaffected. Structs added here start with `struct_size`
 * (the caller's sizeof), so that later versions can grow them and still
 * read what an older caller passes. */

/* Room for a region id (RegionInfo.region_id) and its NUL. */
#define ATTN_CLIENT_REGION_ID_BYTES 64
/* A cudaIpcMemHandle_t. */
#define ATTN_CLIENT_CUDA_IPC_HANDLE_BYTES 64

/* Registers bytes [offset, offset + byte_size) of the POSIX shared-memory
 * object `shm_name` (shm_open's name, e.g. "/attn-42-0"; offset a multiple
 * of the page size) as region `name` (1 to 64 bytes, unique in the lease).
 * The server's id for it is written to `region_id`, which must hold
 * region_id_size >= ATTN_CLIENT_REGION_ID_BYTES bytes. FAILED_PRECONDITION
 * from a server without --allow_shared_memory; NOT_FOUND for an unknown
 * object; ALREADY_EXISTS for a name the lease has. */
ATTN_CLIENT_C_API int attn_client_register_system_region(attn_client_t* client, const char* name,
                                                         const char* shm_name, int64_t offset,
                                                         int64_t byte_size, char* region_id,
                                                         size_t region_id_size, char* error,
                                                         size_t error_size);

/* Registers bytes [offset, offset + byte_size) of the device allocation
 * exported by cudaIpcGetMemHandle (`ipc_handle`: its
 * ATTN_CLIENT_CUDA_IPC_HANDLE_BYTES bytes) on CUDA device `device`, which a
 * CUDA server on the same GPU reads and writes in place. Otherwise as
 * attn_client_register_system_region (FAILED_PRECONDITION from a CPU
 * server). */
ATTN_CLIENT_C_API int attn_client_register_cuda_region(attn_client_t* client, const char* name,
                                                       const void* ipc_handle, int device,
                                                       int64_t offset, int64_t byte_size,
                                                       char* region_id, size_t region_id_size,
                                                       char* error, size_t error_size);

/* Unregisters region `name`; returns once no request uses it (at most the
 * client's rpc_timeout_s; DEADLINE_EXCEEDED after it). NOT_FOUND for a name
 * the lease does not have. */
ATTN_CLIENT_C_API int attn_client_unregister_region(attn_client_t* client, const char* name,
                                                    char* error, size_t error_size);

/* The lease's regions: a serialized ListRegionsResponse in *message (free it
 * with attn_client_buffer_free). */
ATTN_CLIENT_C_API int attn_client_list_regions(attn_client_t* client,
                                               attn_client_buffer_t* message, char* error,
                                               size_t error_size);

/* One tensor in a registered region (attn::TensorRef): bytes
 * [offset, offset + byte_size) of region `region_id`, in the layout the
 * tensor has in memory (see attn_client_attend); offset a multiple of 16,
 * byte_size exactly the tensor's. region_id NULL or "": not by reference. */
typedef struct {
  const char* region_id;
  int64_t offset;
  int64_t byte_size;
} attn_client_tensor_ref_t;

/* The tensors of one call that are in regions. */
typedef struct {
  size_t struct_size; /* sizeof(attn_client_tensor_refs_t) */
  attn_client_tensor_ref_t q, k, v;
  attn_client_tensor_ref_t out; /* the server writes O there */
  attn_client_tensor_ref_t lse; /* the server writes the LSE there (asks for it) */
} attn_client_tensor_refs_t;

/* How a tensor travelled (proto TensorPath, same numbers). */
enum {
  ATTN_TENSOR_PATH_UNSPECIFIED = 0, /* a server from before regions; an LSE not asked for */
  ATTN_TENSOR_PATH_INLINE = 1,      /* in the messages */
  ATTN_TENSOR_PATH_SYSTEM_SHM = 2,  /* a system region */
  ATTN_TENSOR_PATH_CUDA_IPC = 3     /* a CUDA region, read or written by the kernel in place */
};

typedef struct {
  size_t struct_size; /* sizeof(attn_client_tensor_paths_t) */
  int q, k, v, out, lse; /* ATTN_TENSOR_PATH_* */
} attn_client_tensor_paths_t;

/* attn_client_attend with tensors in regions: `refs` (NULL: none) names
 * them, and then
 *   q, k, v: NULL for a tensor given by reference (not both);
 *   out: NULL when refs->out is set (O is not in the response), else as in
 *     attn_client_attend;
 *   lse: NULL when refs->lse is set; the LSE is asked for when either is;
 *   paths: NULL, or receives how each tensor travelled (Timing.*_path).
 * A reference whose byte_size is not the tensor's is INVALID_ARGUMENT
 * naming it, before anything is sent; calls with references are unary
 * (ATTN_TRANSPORT_STREAM is refused). The server checks the rest (region
 * ids, bounds, alignment, outputs overlapping inputs) and its refusals come
 * back with its code and message. */
ATTN_CLIENT_C_API int attn_client_attend_refs(
    attn_client_t* client, const char* kernel, int dtype, const void* q, const void* k,
    const void* v, void* out, float* lse, const int32_t* cu_seqlens_q, const int32_t* cu_seqlens_k,
    int64_t batch, int64_t seqlen_q, int64_t seqlen_k, int64_t heads_q, int64_t heads_kv,
    int64_t head_dim, int causal, int64_t window_left, int64_t window_right, float softmax_scale,
    int64_t total_q, int64_t total_k, double timeout_s, int transport, const char* request_id,
    const attn_client_tensor_refs_t* refs, attn_client_timing_t* timing,
    attn_client_tensor_paths_t* paths, char* error, size_t error_size);

#ifdef __cplusplus
} /* extern "C" */
#endif

#endif /* ATTN_CLIENT_C_API_H_ */
