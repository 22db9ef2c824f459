#include "sessions/session_registry.h"

#include <algorithm>
#include <set>
#include <utility>

#include "absl/strings/str_format.h"
#include "absl/time/clock.h"
#include "regions/region_registry.h"  // RandomId

namespace attn::server {

int64_t PageTokens(int64_t page_bytes, int64_t row_bytes) {
  if (row_bytes <= 0) return 0;
  const int64_t fit = (page_bytes / 2) / row_bytes;
  int64_t tokens = 0;
  for (int64_t t = 1; t <= fit; t *= 2) tokens = t;
  return tokens;
}

// One sequence's cache. Its pages are given back when the last reference
// goes (the registry's, and a step's in flight).
class Session {
  const std::string id_;
  const SessionGeometry geometry_;
  const int64_t page_tokens_;
  PagePool* const pool_;

 public:
  Session(std::string id, const SessionGeometry& geometry, int64_t page_tokens, PagePool* pool,
          int64_t reserved)
      : id_(std::move(id)),
        geometry_(geometry),
        page_tokens_(page_tokens),
        pool_(pool),
        pages_(static_cast<size_t>(geometry.num_layers)),
        tokens_(static_cast<size_t>(geometry.num_layers), 0),
        reserved_(reserved),
        last_used_(absl::Now()) {}
  ~Session() {
    for (const std::vector<int32_t>& layer : pages_) {
      for (int32_t page : layer) pool_->Unref(page);
    }
    pool_->Unreserve(reserved_);
  }

  const std::string& id() const { return id_; }
  const SessionGeometry& geometry() const { return geometry_; }
  int64_t page_tokens() const { return page_tokens_; }
  // Pages tokens of one layer need.
  int64_t PagesFor(int64_t tokens) const { return (tokens + page_tokens_ - 1) / page_tokens_; }

  // Guarded by the registry's lock.
  std::vector<std::vector<int32_t>> pages_;  // per layer, in token order
  std::vector<int64_t> tokens_;              // per layer
  int64_t reserved_ = 0;                     // pages set aside, not yet taken
  bool busy_ = false;
  absl::Time last_used_;

};

namespace {

absl::Status Busy(const std::string& field, const std::string& id) {
  return absl::FailedPreconditionError(absl::StrFormat(
      "%s: session %s… has a call in flight; a session's calls must not overlap (wait for it "
      "to return)",
      field, id.substr(0, 8)));
}

}  // namespace

SessionRegistry::SessionRegistry(const SessionLimits& limits, std::unique_ptr<PagePool> pool,
                                 CopyPageFn copy)
    : limits_(limits), pool_(std::move(pool)), copy_(std::move(copy)) {}

SessionRegistry::~SessionRegistry() {
  std::lock_guard<std::mutex> lock(mu_);
  leases_.clear();
}

std::string SessionRegistry::OpenLease(const std::string& owner) {
  std::string id = RandomId();
  std::lock_guard<std::mutex> lock(mu_);
  leases_[id].owner = owner;
  return id;
}

int64_t SessionRegistry::EndLease(const std::string& lease_id) {
  std::map<std::string, std::shared_ptr<Session>> closed;
  {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = leases_.find(lease_id);
    if (it == leases_.end()) return 0;
    closed.swap(it->second.sessions);
    leases_.erase(it);
  }
  return static_cast<int64_t>(closed.size());  // pages go back as `closed` goes
}

absl::StatusOr<SessionRegistry::Lease*> SessionRegistry::FindLease(const std::string& lease_id,
                                                                   const std::string& owner)
    const {
  auto it = leases_.find(lease_id);
  if (it == leases_.end()) {
    return absl::NotFoundError(absl::StrFormat(
        "lease_id: no session lease '%s…' on this server (HoldSessions makes one; it ends with "
        "its call)",
        lease_id.substr(0, 8)));
  }
  if (it->second.owner != owner) {
    return absl::PermissionDeniedError(
        "lease_id: the lease belongs to another caller (connection or token)");
  }
  return &it->second;
}

absl::StatusOr<std::shared_ptr<Session>> SessionRegistry::FindSession(
    const Lease& lease, const std::string& session_id, const std::string& field) const {
  auto it = lease.sessions.find(session_id);
  if (it == lease.sessions.end()) {
    return absl::NotFoundError(absl::StrFormat("%s: no session '%s…' in this lease", field,
                                               session_id.substr(0, 8)));
  }
  return it->second;
}

namespace {
// INVALID_ARGUMENT with a checked format (absl::FormatSpec keeps the format
// a compile-time constant, which a forwarding lambda would lose).
template <typename... Args>
absl::Status InvalidGeometry(const absl::FormatSpec<Args...>& format, const Args&... args) {
  return absl::InvalidArgumentError(absl::StrFormat(format, args...));
}
}  // namespace

absl::Status SessionRegistry::CheckGeometry(const SessionGeometry& g) const {
  if (g.num_layers < 1 || g.num_layers > 4096) {
    return InvalidGeometry("config.num_layers is %d; it must be in [1, 4096]", g.num_layers);
  }
  if (g.heads_q < 1 || g.heads_q > 1024) {
    return InvalidGeometry("config.num_heads is %d; it must be in [1, 1024]", g.heads_q);
  }
  if (g.heads_kv < 1 || g.heads_q % g.heads_kv != 0) {
    return InvalidGeometry("config.kv_num_heads is %d; it must divide num_heads (%d)", g.heads_kv,
                   g.heads_q);
  }
  if (g.max_tokens < 1 || g.max_tokens > limits_.max_session_tokens) {
    return InvalidGeometry("config.max_tokens is %d; it must be in [1, %d] (--max_session_tokens)",
                   g.max_tokens, limits_.max_session_tokens);
  }
  if (g.window_left < -1) {
    return InvalidGeometry("config.window_left is %d; it must be >= 0, or -1 for the whole cache",
                   g.window_left);
  }
  if (PageTokens(limits_.page_bytes, g.RowBytes()) < 1) {
    return InvalidGeometry(
        "config.kv_num_heads x head_dim is %d elements (%d bytes a token); a page "
        "(--kv_page_bytes=%d) holds K and V halves of at least one token",
        g.heads_kv * g.head_dim, g.RowBytes(), limits_.page_bytes);
  }
  return absl::OkStatus();
}

SessionSnapshot SessionRegistry::Snapshot(const Session& s) const {
  SessionSnapshot snap;
  snap.session_id = s.id();
  snap.geometry = s.geometry();
  snap.layer_tokens = s.tokens_;
  snap.page_tokens = s.page_tokens();
  for (const auto& layer : s.pages_) snap.pages += static_cast<int64_t>(layer.size());
  snap.busy = s.busy_;
  return snap;
}

void SessionRegistry::NotePoolFull(const absl::Status& status) {
  if (status.code() == absl::StatusCode::kResourceExhausted) ++counters_.rejected_pool_full;
}

absl::StatusOr<SessionSnapshot> SessionRegistry::Open(const std::string& lease_id,
                                                      const std::string& owner,
                                                      const SessionGeometry& geometry) {
  if (absl::Status ok = CheckGeometry(geometry); !ok.ok()) return ok;
  const int64_t page_tokens = PageTokens(limits_.page_bytes, geometry.RowBytes());
  std::lock_guard<std::mutex> lock(mu_);
  absl::StatusOr<Lease*> lease = FindLease(lease_id, owner);
  if (!lease.ok()) return lease.status();
  if (static_cast<int64_t>((*lease)->sessions.size()) >= limits_.max_sessions_per_lease) {
    return absl::ResourceExhaustedError(
        absl::StrFormat("lease_id: the lease holds %d sessions, the most one may "
                        "(--max_sessions_per_lease)",
                        (*lease)->sessions.size()));
  }
  int64_t reserved = 0;
  if (geometry.reserve) {
    reserved = geometry.num_layers * ((geometry.max_tokens + page_tokens - 1) / page_tokens);
    absl::Status taken = pool_->Reserve(
        reserved, absl::StrFormat("config.reserve (%d layers x %d tokens)", geometry.num_layers,
                                  geometry.max_tokens));
    if (!taken.ok()) {
      NotePoolFull(taken);
      return taken;
    }
  }
  auto session =
      std::make_shared<Session>(RandomId(), geometry, page_tokens, pool_.get(), reserved);
  (*lease)->sessions[session->id()] = session;
  return Snapshot(*session);
}

absl::Status SessionRegistry::Close(const std::string& lease_id, const std::string& owner,
                                    const std::string& session_id) {
  std::shared_ptr<Session> closed;
  std::lock_guard<std::mutex> lock(mu_);
  absl::StatusOr<Lease*> lease = FindLease(lease_id, owner);
  if (!lease.ok()) return lease.status();
  auto it = (*lease)->sessions.find(session_id);
  if (it == (*lease)->sessions.end()) {
    return absl::NotFoundError(
        absl::StrFormat("session_id: no session '%s…' in this lease", session_id.substr(0, 8)));
  }
  closed = std::move(it->second);  // freed after the lock, or when its step ends
  (*lease)->sessions.erase(it);
  return absl::OkStatus();
}

absl::StatusOr<SessionSnapshot> SessionRegistry::Fork(const std::string& lease_id,
                                                      const std::string& owner,
                                                      const std::string& session_id) {
  std::lock_guard<std::mutex> lock(mu_);
  absl::StatusOr<Lease*> lease = FindLease(lease_id, owner);
  if (!lease.ok()) return lease.status();
  absl::StatusOr<std::shared_ptr<Session>> found = FindSession(**lease, session_id, "session_id");
  if (!found.ok()) return found.status();
  const Session& parent = **found;
  if (parent.busy_) return Busy("session_id", session_id);
  if (static_cast<int64_t>((*lease)->sessions.size()) >= limits_.max_sessions_per_lease) {
    return absl::ResourceExhaustedError(absl::StrFormat(
        "lease_id: the lease holds %d sessions, the most one may (--max_sessions_per_lease)",
        (*lease)->sessions.size()));
  }
  // The child grows page by page: a parent's reservation is not inherited.
  SessionGeometry geometry = parent.geometry();
  geometry.reserve = false;
  // One new page per layer whose last page is partial.
  int64_t partial = 0;
  for (int64_t t : parent.tokens_) partial += (t % parent.page_tokens() != 0) ? 1 : 0;
  absl::StatusOr<std::vector<int32_t>> fresh =
      pool_->Take(partial, 0, absl::StrFormat("ForkSession (%d partial pages)", partial));
  if (!fresh.ok()) {
    NotePoolFull(fresh.status());
    return fresh.status();
  }
  auto child = std::make_shared<Session>(RandomId(), geometry, parent.page_tokens(), pool_.get(),
                                         0);
  child->tokens_ = parent.tokens_;
  size_t next = 0;
  absl::Status copied;
  for (size_t l = 0; l < parent.pages_.size(); ++l) {
    const std::vector<int32_t>& from = parent.pages_[l];
    const int64_t rest = parent.tokens_[l] % parent.page_tokens();
    std::vector<int32_t>& to = child->pages_[l];
    const size_t full = from.size() - (rest != 0 ? 1 : 0);
    for (size_t i = 0; i < full; ++i) {
      pool_->Ref(from[i]);
      to.push_back(from[i]);
    }
    if (rest != 0) {
      const int32_t page = (*fresh)[next++];
      to.push_back(page);  // the child holds it from here, copied or not
      if (copied.ok()) copied = copy_(page, from.back(), rest * geometry.RowBytes());
    }
  }
  if (!copied.ok()) return copied;  // `child` goes, and its pages with it
  (*lease)->sessions[child->id()] = child;
  ++counters_.forks;
  return Snapshot(*child);
}

absl::StatusOr<SessionSnapshot> SessionRegistry::Truncate(const std::string& lease_id,
                                                          const std::string& owner,
                                                          const std::string& session_id,
                                                          int64_t tokens) {
  std::lock_guard<std::mutex> lock(mu_);
  absl::StatusOr<Lease*> lease = FindLease(lease_id, owner);
  if (!lease.ok()) return lease.status();
  absl::StatusOr<std::shared_ptr<Session>> found = FindSession(**lease, session_id, "session_id");
  if (!found.ok()) return found.status();
  Session& s = **found;
  if (s.busy_) return Busy("session_id", session_id);
  const auto [lo, hi] = std::minmax_element(s.tokens_.begin(), s.tokens_.end());
  if (*lo != *hi) {
    return absl::FailedPreconditionError(absl::StrFormat(
        "session_id: its layers hold %d to %d tokens (a step is part-way through the layers); "
        "truncate between steps",
        *lo, *hi));
  }
  if (tokens < 0 || tokens > *lo) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "tokens is %d; the session holds %d, so at most that many can be dropped", tokens, *lo));
  }
  const int64_t keep = *lo - tokens;
  const int64_t rest = keep % s.page_tokens();
  const size_t pages_kept = static_cast<size_t>(s.PagesFor(keep));
  // The last kept page is written by the next append: copy it if shared.
  int64_t shared_last = 0;
  for (const auto& layer : s.pages_) {
    if (rest != 0 && pool_->refs(layer[pages_kept - 1]) > 1) ++shared_last;
  }
  absl::StatusOr<std::vector<int32_t>> fresh = pool_->Take(
      shared_last, s.reserved_, absl::StrFormat("TruncateSession (%d shared pages)", shared_last));
  if (!fresh.ok()) {
    NotePoolFull(fresh.status());
    return fresh.status();
  }
  s.reserved_ -= std::min(s.reserved_, shared_last);
  size_t next = 0;
  absl::Status copied;
  for (size_t l = 0; l < s.pages_.size(); ++l) {
    std::vector<int32_t>& layer = s.pages_[l];
    // A reserved session sets the pages it frees aside again, so its later
    // appends still find them (shared ones freed by no one stay taken).
    const std::vector<int32_t> dropped(layer.begin() + static_cast<ptrdiff_t>(pages_kept),
                                       layer.end());
    s.reserved_ += pool_->UnrefAndReserve(
        dropped, s.geometry().reserve ? static_cast<int64_t>(dropped.size()) : 0);
    layer.resize(pages_kept);
    s.tokens_[l] = keep;
    if (rest != 0 && pool_->refs(layer.back()) > 1) {
      const int32_t page = (*fresh)[next++];
      if (copied.ok()) copied = copy_(page, layer.back(), rest * s.geometry().RowBytes());
      pool_->Unref(layer.back());
      layer.back() = page;
    }
  }
  s.last_used_ = absl::Now();
  if (!copied.ok()) return copied;
  return Snapshot(s);
}

absl::StatusOr<std::vector<SessionSnapshot>> SessionRegistry::List(
    const std::string& lease_id, const std::string& owner) const {
  std::lock_guard<std::mutex> lock(mu_);
  absl::StatusOr<Lease*> lease = FindLease(lease_id, owner);
  if (!lease.ok()) return lease.status();
  std::vector<SessionSnapshot> out;
  for (const auto& [id, session] : (*lease)->sessions) out.push_back(Snapshot(*session));
  return out;
}

absl::StatusOr<StepPlan> SessionRegistry::BeginStep(const std::string& lease_id,
                                                    const std::string& owner, int64_t layer,
                                                    absl::Span<const StepEntry> steps) {
  if (steps.empty() || static_cast<int64_t>(steps.size()) > limits_.max_steps_per_call) {
    return absl::InvalidArgumentError(
        absl::StrFormat("steps has %d entries; a call has 1 to %d (--max_steps_per_call)",
                        steps.size(), limits_.max_steps_per_call));
  }
  std::lock_guard<std::mutex> lock(mu_);
  absl::StatusOr<Lease*> lease = FindLease(lease_id, owner);
  if (!lease.ok()) return lease.status();
  StepPlan plan;
  plan.layer = layer;
  std::set<std::string> seen;
  int64_t needed = 0, from_reserved = 0, longest_pages = 0;
  for (size_t i = 0; i < steps.size(); ++i) {
    const std::string field = absl::StrFormat("steps[%d].session_id", i);
    absl::StatusOr<std::shared_ptr<Session>> found =
        FindSession(**lease, steps[i].session_id, field);
    if (!found.ok()) return found.status();
    const Session& s = **found;
    if (!seen.insert(s.id()).second) {
      return absl::InvalidArgumentError(
          absl::StrFormat("%s: the session appears twice in one call", field));
    }
    if (s.busy_) return Busy(field, s.id());
    if (i == 0) {
      plan.geometry = s.geometry();
      plan.page_tokens = s.page_tokens();
      if (layer < 0 || layer >= s.geometry().num_layers) {
        return absl::InvalidArgumentError(absl::StrFormat(
            "layer is %d; the sessions have %d layers", layer, s.geometry().num_layers));
      }
    } else if (!s.geometry().SameComputation(plan.geometry)) {
      return absl::InvalidArgumentError(absl::StrFormat(
          "%s: its dtype, heads, head_dim, scale or window differ from steps[0]'s; one call "
          "runs sessions of one geometry",
          field));
    }
    if (layer >= s.geometry().num_layers) {
      return absl::InvalidArgumentError(absl::StrFormat(
          "layer is %d; steps[%d]'s session has %d layers", layer, i, s.geometry().num_layers));
    }
    const int64_t cached = s.tokens_[static_cast<size_t>(layer)];
    const int64_t n = steps[i].tokens;
    if (n < 1 || n > s.geometry().max_tokens - cached) {
      return absl::InvalidArgumentError(absl::StrFormat(
          "steps[%d].tokens is %d; the session's layer %d holds %d of at most %d tokens "
          "(config.max_tokens), so 1 to %d more fit",
          i, n, layer, cached, s.geometry().max_tokens, s.geometry().max_tokens - cached));
    }
    const int64_t grow = s.PagesFor(cached + n) - static_cast<int64_t>(
                                                      s.pages_[static_cast<size_t>(layer)].size());
    needed += grow;
    from_reserved += std::min(grow, s.reserved_);
    longest_pages = std::max(longest_pages, s.PagesFor(cached + n));
    plan.sessions.push_back(*found);
  }
  const int64_t entries = static_cast<int64_t>(steps.size()) * longest_pages;
  if (entries > limits_.max_step_block_entries) {
    return absl::ResourceExhaustedError(absl::StrFormat(
        "the call's block table would have %d entries (%d steps x %d pages of its longest "
        "session); a call has at most %d: send fewer sessions per call",
        entries, steps.size(), longest_pages, limits_.max_step_block_entries));
  }
  // All of the call's new pages at once, or none (the reservations of the
  // sessions that have them are drawn first).
  absl::StatusOr<std::vector<int32_t>> fresh = pool_->Take(
      needed, from_reserved,
      absl::StrFormat("AttendSessions (layer %d, %d steps)", layer, steps.size()));
  if (!fresh.ok()) {
    NotePoolFull(fresh.status());
    return fresh.status();
  }
  const size_t rows = steps.size();
  plan.cu_seqlens_q.assign(rows + 1, 0);
  plan.cache_seqlens.resize(rows);
  plan.new_pages.resize(rows);
  plan.from_reserved.assign(rows, 0);
  size_t next = 0;
  for (size_t i = 0; i < rows; ++i) {
    Session& s = *plan.sessions[i];
    const int64_t cached = s.tokens_[static_cast<size_t>(layer)];
    const int64_t n = steps[i].tokens;
    const int64_t grow =
        s.PagesFor(cached + n) - static_cast<int64_t>(s.pages_[static_cast<size_t>(layer)].size());
    plan.from_reserved[i] = std::min(grow, s.reserved_);
    s.reserved_ -= plan.from_reserved[i];
    for (int64_t g = 0; g < grow; ++g) plan.new_pages[i].push_back((*fresh)[next++]);
    s.busy_ = true;
    s.last_used_ = absl::Now();
    plan.cache_seqlens[i] = static_cast<int32_t>(cached);
    plan.cu_seqlens_q[i + 1] = plan.cu_seqlens_q[i] + static_cast<int32_t>(n);
    plan.max_pages_per_seq = std::max(plan.max_pages_per_seq, s.PagesFor(cached + n));
  }
  plan.total_tokens = plan.cu_seqlens_q.back();
  plan.block_table.assign(rows * static_cast<size_t>(plan.max_pages_per_seq), 0);
  for (size_t i = 0; i < rows; ++i) {
    const std::vector<int32_t>& held = plan.sessions[i]->pages_[static_cast<size_t>(layer)];
    int32_t* row = plan.block_table.data() + i * static_cast<size_t>(plan.max_pages_per_seq);
    std::copy(held.begin(), held.end(), row);
    std::copy(plan.new_pages[i].begin(), plan.new_pages[i].end(), row + held.size());
  }
  return plan;
}

void SessionRegistry::EndStep(StepPlan& plan, bool succeeded) {
  if (plan.ended) return;
  plan.ended = true;
  std::lock_guard<std::mutex> lock(mu_);
  for (size_t i = 0; i < plan.sessions.size(); ++i) {
    Session& s = *plan.sessions[i];
    s.busy_ = false;
    s.last_used_ = absl::Now();
    const int64_t n = plan.cu_seqlens_q[i + 1] - plan.cu_seqlens_q[i];
    if (succeeded) {
      std::vector<int32_t>& layer = s.pages_[static_cast<size_t>(plan.layer)];
      layer.insert(layer.end(), plan.new_pages[i].begin(), plan.new_pages[i].end());
      s.tokens_[static_cast<size_t>(plan.layer)] += n;
    } else {
      s.reserved_ += pool_->UnrefAndReserve(plan.new_pages[i], plan.from_reserved[i]);
    }
  }
  if (succeeded) {
    ++counters_.steps;
    counters_.tokens_appended += plan.total_tokens;
  }
  plan.sessions.clear();  // a closed session's pages go back now
}

int64_t SessionRegistry::ExpireIdle(absl::Time now) {
  if (limits_.idle_timeout <= absl::ZeroDuration()) return 0;
  std::vector<std::shared_ptr<Session>> expired;
  std::lock_guard<std::mutex> lock(mu_);
  for (auto& [lease_id, lease] : leases_) {
    for (auto it = lease.sessions.begin(); it != lease.sessions.end();) {
      if (!it->second->busy_ && now - it->second->last_used_ >= limits_.idle_timeout) {
        expired.push_back(std::move(it->second));
        it = lease.sessions.erase(it);
      } else {
        ++it;
      }
    }
  }
  counters_.expired += static_cast<int64_t>(expired.size());
  return static_cast<int64_t>(expired.size());
}

SessionRegistry::Counters SessionRegistry::counters() const {
  std::lock_guard<std::mutex> lock(mu_);
  Counters c = counters_;
  for (const auto& [lease_id, lease] : leases_) {
    c.sessions += static_cast<int64_t>(lease.sessions.size());
    for (const auto& [id, session] : lease.sessions) {
      for (int64_t t : session->tokens_) c.tokens_cached += t;
    }
  }
  return c;
}

}  // namespace attn::server
