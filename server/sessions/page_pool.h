// server/sessions/page_pool.h
//
// PagePool: the pages of one device's (or the host's) KV-cache memory,
// handed to sessions one at a time and reference counted, so a fork shares
// its parent's full pages and a page goes back to the pool when the last
// session holding it lets go. A page is `page_bytes` of memory: its first
// half holds K rows, its second V rows (page_layout.h says how many tokens
// a session's geometry fits). Reservations set pages aside for a session
// (SessionConfig.reserve) without naming them: a reserved session's later
// takes draw on its reservation first, so they never find the pool full.
//
// The pool does not own its memory and never touches it: it hands out page
// ids. Thread-safe.
#ifndef ATTN_SERVER_SESSIONS_PAGE_POOL_H_
#define ATTN_SERVER_SESSIONS_PAGE_POOL_H_

#include <cstdint>
#include <mutex>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace attn::server {

class PagePool {
 public:
  // `num_pages` pages (at most int32's range: kernels' block tables are
  // int32), none taken.
  explicit PagePool(int64_t num_pages);

  int64_t pages_total() const { return total_; }
  // Pages neither held nor reserved.
  int64_t pages_free() const;
  // Pages held by some session, or reserved for one.
  int64_t pages_used() const { return total_ - pages_free(); }

  // Sets `pages` aside, or RESOURCE_EXHAUSTED naming `what`, the pages
  // asked for and those free.
  absl::Status Reserve(int64_t pages, absl::string_view what);
  // Gives back `pages` of a reservation that were never taken.
  void Unreserve(int64_t pages);

  // `count` pages with reference count 1: `from_reserved` of them out of
  // the caller's reservation, the rest from the free pages. All or none:
  // RESOURCE_EXHAUSTED naming `what`, the pages needed and free.
  absl::StatusOr<std::vector<int32_t>> Take(int64_t count, int64_t from_reserved,
                                            absl::string_view what);
  // One more holder of `page` (a fork).
  void Ref(int32_t page);
  // One holder less; at zero the page is free again.
  void Unref(int32_t page);
  // Unref of each of `pages`, then, of those freed, up to `reserve` set
  // aside again, in one step (no other take between): a failed step gives
  // back what it drew from its sessions' reservations. Returns how many
  // were reserved again.
  int64_t UnrefAndReserve(const std::vector<int32_t>& pages, int64_t reserve);
  // Holders of `page` now (0: free).
  int32_t refs(int32_t page) const;

 private:
  const int64_t total_;
  mutable std::mutex mu_;
  std::vector<int32_t> free_;   // a stack: the most recently freed first
  std::vector<int32_t> refs_;   // per page
  int64_t reserved_ = 0;        // set aside, not yet taken
};

}  // namespace attn::server

#endif  // ATTN_SERVER_SESSIONS_PAGE_POOL_H_
