// server/sessions/session_registry.h
//
// SessionRegistry: the leases and KV-cache sessions of HoldSessions and the
// session calls (attention.proto), over one PagePool. Thread-safe.
//
// A lease belongs to the identity that opened it (a connection's peer, or
// a token's identity): every call naming it must come from that identity
// (PERMISSION_DENIED otherwise), and names only sessions of that lease
// (NOT_FOUND otherwise). Ending the lease closes its sessions.
//
// A session is one sequence's cache over num_layers layers: per layer the
// pages it holds, in token order, and how many tokens are cached. Pages
// are taken as tokens arrive (or set aside at open: SessionConfig.reserve),
// shared read-only with forks, and copied before a write would touch a
// shared one: a fork copies the parent's partial last page at once (the
// only page an append writes), and a truncate that ends inside a shared
// page copies that page. So an append never writes a page another session
// reads.
//
// A step (AttendSessions) is BeginStep, the kernel, then EndStep: BeginStep
// checks every step, takes the pages the new tokens need (all or none),
// marks the sessions busy and returns what the kernel needs (block table,
// cached lengths); EndStep commits the new lengths, or on failure gives the
// new pages back, and marks them idle. A busy session refuses every other
// call (FAILED_PRECONDITION) except Close, which takes it out of the lease
// at once; its pages go back when the step in flight ends.
#ifndef ATTN_SERVER_SESSIONS_SESSION_REGISTRY_H_
#define ATTN_SERVER_SESSIONS_SESSION_REGISTRY_H_

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "absl/types/span.h"
#include "attn/dtype.h"
#include "sessions/page_pool.h"

namespace attn::server {

// What a session caches and computes (SessionConfig, resolved).
struct SessionGeometry {
  DType dtype = DType::kBFloat16;
  int64_t num_layers = 0;
  int64_t heads_q = 0;
  int64_t heads_kv = 0;
  int64_t head_dim = 0;
  float softmax_scale = 0.0f;  // 0: 1/sqrt(head_dim)
  int64_t window_left = -1;    // -1: the whole cache
  int64_t max_tokens = 0;
  bool reserve = false;

  // Bytes of one token's K (or V) in one layer.
  int64_t RowBytes() const { return heads_kv * head_dim * DTypeSize(dtype); }
  // Same function of the same inputs: steps of such sessions share a launch.
  bool SameComputation(const SessionGeometry& o) const {
    return dtype == o.dtype && heads_q == o.heads_q && heads_kv == o.heads_kv &&
           head_dim == o.head_dim && softmax_scale == o.softmax_scale &&
           window_left == o.window_left;
  }
};

struct SessionLimits {
  int64_t page_bytes = int64_t{128} << 10;  // --kv_page_bytes: K and V halves
  int64_t max_session_tokens = int64_t{1} << 20;
  int max_steps_per_call = 256;
  int max_sessions_per_lease = 4096;
  // Entries of one call's block table (steps x the pages of its longest
  // session) at most: what an executor's staging holds (StepBlockEntries).
  int64_t max_step_block_entries = int64_t{1} << 20;
  absl::Duration idle_timeout = absl::ZeroDuration();  // 0: sessions never expire
};

// Tokens of one layer a page holds for rows of `row_bytes`: the largest
// power of two whose K rows fit half a page (0 when not even one does).
int64_t PageTokens(int64_t page_bytes, int64_t row_bytes);

// A session as ListSessions reports it.
struct SessionSnapshot {
  std::string session_id;
  SessionGeometry geometry;
  std::vector<int64_t> layer_tokens;
  int64_t page_tokens = 0;
  int64_t pages = 0;
  bool busy = false;
};

// One entry of a step call: a session and its new tokens.
struct StepEntry {
  std::string session_id;
  int64_t tokens = 0;
};

class Session;

// What BeginStep prepared for the kernel: the steps as one paged,
// appending, varlen problem over the pool.
struct StepPlan {
  SessionGeometry geometry;
  int64_t layer = 0;
  int64_t page_tokens = 0;
  int64_t max_pages_per_seq = 0;  // columns of block_table
  int64_t total_tokens = 0;       // new tokens, summed over the steps
  std::vector<int32_t> cu_seqlens_q;   // steps + 1 offsets of the new tokens
  std::vector<int32_t> cache_seqlens;  // per step: tokens cached before it
  std::vector<int32_t> block_table;    // [steps, max_pages_per_seq]; unused entries 0

  // For EndStep.
  std::vector<std::shared_ptr<Session>> sessions;
  std::vector<std::vector<int32_t>> new_pages;  // per step
  std::vector<int64_t> from_reserved;           // per step: of new_pages, drawn on its reservation
  bool ended = false;
};

class SessionRegistry {
 public:
  // Copies the first `bytes` of both halves of page `src` into page `dst`
  // and returns when done (device memory: a synchronous copy).
  using CopyPageFn = std::function<absl::Status(int32_t dst, int32_t src, int64_t bytes)>;

  SessionRegistry(const SessionLimits& limits, std::unique_ptr<PagePool> pool, CopyPageFn copy);
  ~SessionRegistry();

  const SessionLimits& limits() const { return limits_; }
  const PagePool& pool() const { return *pool_; }

  // A new, empty lease held by `owner`.
  std::string OpenLease(const std::string& owner);
  // Closes every session of the lease and forgets it; returns how many.
  int64_t EndLease(const std::string& lease_id);

  // OK when sessions of `g` fit this registry's limits, else
  // INVALID_ARGUMENT naming the SessionConfig field (Open checks it too).
  absl::Status CheckGeometry(const SessionGeometry& g) const;
  // INVALID_ARGUMENT naming the SessionConfig field, RESOURCE_EXHAUSTED for
  // a reservation the pool cannot take or a full lease.
  absl::StatusOr<SessionSnapshot> Open(const std::string& lease_id, const std::string& owner,
                                       const SessionGeometry& geometry);
  absl::Status Close(const std::string& lease_id, const std::string& owner,
                     const std::string& session_id);
  // The child, in the same lease.
  absl::StatusOr<SessionSnapshot> Fork(const std::string& lease_id, const std::string& owner,
                                       const std::string& session_id);
  absl::StatusOr<SessionSnapshot> Truncate(const std::string& lease_id, const std::string& owner,
                                           const std::string& session_id, int64_t tokens);
  absl::StatusOr<std::vector<SessionSnapshot>> List(const std::string& lease_id,
                                                    const std::string& owner) const;

  absl::StatusOr<StepPlan> BeginStep(const std::string& lease_id, const std::string& owner,
                                     int64_t layer, absl::Span<const StepEntry> steps);
  // Once per successful BeginStep (a second call is a no-op).
  void EndStep(StepPlan& plan, bool succeeded);

  // Closes the idle sessions not used for limits().idle_timeout before
  // `now` (none when it is 0); returns how many.
  int64_t ExpireIdle(absl::Time now);

  struct Counters {
    int64_t sessions = 0;
    int64_t tokens_cached = 0;  // over sessions and layers
    int64_t steps = 0;
    int64_t tokens_appended = 0;
    int64_t forks = 0;
    int64_t expired = 0;
    int64_t rejected_pool_full = 0;
  };
  Counters counters() const;

 private:
  struct Lease {
    std::string owner;
    std::map<std::string, std::shared_ptr<Session>> sessions;
  };
  // The lease, after checking its owner (NOT_FOUND, PERMISSION_DENIED).
  absl::StatusOr<Lease*> FindLease(const std::string& lease_id, const std::string& owner)
      const;
  // The session of the lease (NOT_FOUND naming `field`).
  absl::StatusOr<std::shared_ptr<Session>> FindSession(const Lease& lease,
                                                       const std::string& session_id,
                                                       const std::string& field) const;
  SessionSnapshot Snapshot(const Session& session) const;
  void NotePoolFull(const absl::Status& status);

  const SessionLimits limits_;
  const std::unique_ptr<PagePool> pool_;
  const CopyPageFn copy_;
  mutable std::mutex mu_;
  mutable std::map<std::string, Lease> leases_;
  Counters counters_;  // sessions and tokens_cached are computed in counters()
};

}  // namespace attn::server

#endif  // ATTN_SERVER_SESSIONS_SESSION_REGISTRY_H_
