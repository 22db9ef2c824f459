// server/core/job.h
//
// The unit of work between the RPC front end, the scheduler and the
// executors: one decoded attention request, the buffers it reads and writes,
// and its timing. No gRPC or CUDA types: the scheduler and executors never
// see protos, and the front end never sees devices.
//
// Ownership: the front end owns the input and output memory a Job points to
// and keeps it alive until the Job's `done` callback has run.
#ifndef ATTN_SERVER_CORE_JOB_H_
#define ATTN_SERVER_CORE_JOB_H_

#include <atomic>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/functional/any_invocable.h"
#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "attn/attention.h"
#include "attn/problem.h"
#include "core/tensor_place.h"

namespace attn::server {

// A validated request: what to compute, before any tensor bytes are looked
// at. Copyable; the kernel handle points into the server's KernelCatalog,
// which outlives every request.
// A session step's K/V cache (sessions/): the pool's pages (K rows in the
// first half of each page, V in the second) and, per sequence, the tokens
// cached before the call and its row of the block table. The spec's
// problem is then paged, appending and varlen; q and the job's k, v hold
// the new tokens.
struct PagedCache {
  char* pool = nullptr;  // page 0: host memory (CPU backend) or device memory
  int64_t page_bytes = 0;
  int device = -1;       // the CUDA ordinal of the pool; -1 on the host
  std::vector<int32_t> cache_seqlens;  // [batch]
  std::vector<int32_t> block_table;    // [batch, problem.max_pages_per_seq]
};

struct RequestSpec {
  std::string request_id;
  DType dtype = DType::kBFloat16;
  // Lengths, heads, mask, scale, LSE and varlen flags, in FA2's conventions.
  AttentionProblem problem;
  // Varlen only: host copies of the token offsets, problem.batch + 1 each.
  std::vector<int32_t> cu_seqlens_q, cu_seqlens_k;
  // The kernel, resolved once for this server's backend and problem.
  const KernelHandle* kernel = nullptr;
  // Set for a session step (problem.kv_cache), else empty.
  std::shared_ptr<const PagedCache> cache;

  const KernelInfo& kernel_info() const { return kernel->info(); }
  // Bytes of Q (and of O), of K (and of V) as the request carries them, and
  // of the float32 LSE (0 unless problem.return_lse).
  int64_t QBytes() const { return problem.QBytes(dtype); }
  // A session step carries its new tokens' k and v, not the cache.
  int64_t KVBytes() const {
    return problem.kv_cache ? problem.QTokens() * problem.heads_kv * problem.head_dim *
                                  static_cast<int64_t>(DTypeSize(dtype))
                            : problem.KVBytes(dtype);
  }
  int64_t LseBytes() const { return problem.LseBytes(); }
  // Bytes in (q, k, v) and out (o, lse) of the request.
  int64_t InputBytes() const { return QBytes() + 2 * KVBytes(); }
  int64_t OutputBytes() const { return QBytes() + LseBytes(); }
  // The work of the call (exact for masks and ragged lengths).
  double Flops() const {
    return problem.varlen ? problem.Flops(cu_seqlens_q.data(), cu_seqlens_k.data())
                          : problem.Flops();
  }
  // The kernel's arguments for dense tensors at the given addresses, with
  // this spec's host copies of cu_seqlens (a GPU executor replaces them with
  // its device copies).
  // A session step's k and v are its new tokens, appended into the cache's
  // pool (at `pool`: the host's, or a GPU executor's device pointer), with
  // the cache's host vectors (a GPU executor replaces them too).
  AttentionArgs Args(const void* q, const void* k, const void* v, void* out, float* lse) const {
    if (problem.kv_cache && cache != nullptr) {
      return StepArgs(cache->pool, q, k, v, out, lse, cu_seqlens_q.data(),
                      cache->cache_seqlens.data(), cache->block_table.data());
    }
    AttentionArgs args = AttentionArgs::Contiguous(problem, dtype, q, k, v, out, lse);
    if (problem.varlen) {
      args.cu_seqlens_q = cu_seqlens_q.data();
      args.cu_seqlens_k = cu_seqlens_k.data();
    }
    return args;
  }
  AttentionArgs StepArgs(const char* pool, const void* q, const void* k_new, const void* v_new,
                         void* out, float* lse, const int32_t* cu_q, const int32_t* cache_seqlens,
                         const int32_t* block_table) const {
    const int64_t half = cache->page_bytes / 2;
    AttentionArgs args =
        AttentionArgs::Contiguous(problem, dtype, q, pool, pool + half, out, lse);
    // Pages a whole page apart, rows of heads_kv x head_dim.
    args.k_strides = args.v_strides = {
        cache->page_bytes / static_cast<int64_t>(DTypeSize(dtype)),
        problem.heads_kv * problem.head_dim, problem.head_dim};
    args.k_new = k_new;
    args.v_new = v_new;
    args.cu_seqlens_q = cu_q;
    args.cache_seqlens = cache_seqlens;
    args.block_table = block_table;
    return args;
  }
};

// Where a request's time went, in nanoseconds (the proto's Timing). Parts
// are disjoint; total covers arrival to response-ready and includes them.
struct PhaseTimes {
  int64_t receive_ns = 0;  // AttendStream: header to last input chunk
  int64_t decode_ns = 0;   // validating the request and building the job
  int64_t queue_ns = 0;    // waiting for a worker
  int64_t h2d_ns = 0;      // staging and copying Q, K, V (and cu_seqlens) to the device
  int64_t kernel_ns = 0;   // the attention kernel
  int64_t d2h_ns = 0;      // copying O (and the LSE) back and out of staging
  int64_t total_ns = 0;
  // Not a time: how many requests shared this one's kernel launch (request
  // batching, scheduler.h); 0 when it ran alone.
  int64_t batch_size = 0;
};

// O (and the LSE) left in memory an executor lends the front end, which
// sends the response straight from it instead of from copies in the job's
// strings; destroying the object gives the memory back to the executor.
// Thread-safe to destroy from any thread (gRPC frees sent slices on its own).
class OutputBuffer {
 public:
  virtual ~OutputBuffer() = default;
  virtual absl::string_view out() const = 0;
  virtual absl::string_view lse() const = 0;  // empty unless the problem returns it
};

struct Job;
// Runs once per submitted job, with the job handed back and its outcome.
using JobDone = absl::AnyInvocable<void(std::unique_ptr<Job> job, absl::Status status)>;

struct Job {
  RequestSpec spec;
  // Inputs, little-endian 16-bit elements: q has spec.QBytes(), k and v
  // spec.KVBytes() each, where the front end received them.
  TensorSource q, k, v;
  // Outputs: O (spec.QBytes()) and, when spec.problem.return_lse, the
  // float32 (little-endian) log-sum-exp of each query row (spec.LseBytes());
  // `lse` is unset otherwise. An executor writes each where its destination
  // says; for kResponse it may instead lend memory holding both (`lent`,
  // only when every output set is kResponse).
  TensorDestination out, lse;
  std::unique_ptr<OutputBuffer> lent;

  absl::Time arrival;                            // total_ns counts from here
  absl::Time deadline = absl::InfiniteFuture();  // the client's deadline
  // Set by the front end when the client cancels; may be null.
  const std::atomic<bool>* cancelled = nullptr;

  PhaseTimes times;
  std::string device;  // filled by the executor that ran it, e.g. "cpu (2 threads)"
  JobDone done;

  bool Cancelled() const {
    return cancelled != nullptr && cancelled->load(std::memory_order_acquire);
  }
  // Bytes of the inputs and outputs that travel in messages (what the
  // server's memory holds for this call); those in regions are not counted.
  int64_t MessageInputBytes() const {
    return (q.in_region() ? 0 : spec.QBytes()) + (k.in_region() ? 0 : spec.KVBytes()) +
           (v.in_region() ? 0 : spec.KVBytes());
  }
  int64_t MessageOutputBytes() const {
    return (out.in_region() ? 0 : spec.QBytes()) +
           (spec.problem.return_lse && !lse.in_region() ? spec.LseBytes() : 0);
  }
  // True when some tensor is in a region.
  bool UsesRegions() const {
    return q.in_region() || k.in_region() || v.in_region() || out.in_region() ||
           (spec.problem.return_lse && lse.in_region());
  }
  // True when the executor may lend `lent` instead of writing the outputs:
  // every output goes into the response.
  bool MayLendOutputs() const {
    return out.kind == DestinationKind::kResponse &&
           (!spec.problem.return_lse || lse.kind == DestinationKind::kResponse);
  }
};

// Whole nanoseconds in `d` (saturating).
inline int64_t ToNanos(absl::Duration d) { return absl::ToInt64Nanoseconds(d); }

}  // namespace attn::server

#endif  // ATTN_SERVER_CORE_JOB_H_
