// server/sessions/session_memory.h
//
// SessionMemory: the memory of a KV-cache page pool (host memory for the
// CPU backend, one device's for the CUDA backend) and the one operation the
// registry performs on it, copying a page (copy-on-write for forks and
// truncations). The pool itself (page_pool.h) only hands out page ids; the
// kernels read and write the pages through PoolLayout.
#ifndef ATTN_SERVER_SESSIONS_SESSION_MEMORY_H_
#define ATTN_SERVER_SESSIONS_SESSION_MEMORY_H_

#include <cstdint>
#include <memory>

#include "absl/status/status.h"

namespace attn::server {

// The pool's memory: `num_pages` pages of `page_bytes` at `base` (host or
// device memory of `device`; -1 the host).
struct PoolLayout {
  char* base = nullptr;
  int64_t num_pages = 0;
  int64_t page_bytes = 0;
  int device = -1;
};

// Pages of `page_bytes` that `pool_bytes` holds, at most int32's range
// (block tables are int32); 0 when not one fits.
int64_t PoolPages(int64_t pool_bytes, int64_t page_bytes);

class SessionMemory {
 public:
  virtual ~SessionMemory() = default;
  virtual const PoolLayout& layout() const = 0;
  // Copies the first `bytes` of both halves (K and V) of page `src` into
  // page `dst`, and returns when the copy is done: the next kernel that
  // reads `dst` sees it. No kernel writes either page meanwhile (the
  // registry copies only pages of idle sessions into free pages).
  virtual absl::Status CopyPage(int32_t dst, int32_t src, int64_t bytes) = 0;
};

// `num_pages` pages of host memory (untouched until written: the OS maps
// them as sessions use them).
std::unique_ptr<SessionMemory> HostSessionMemory(int64_t num_pages, int64_t page_bytes);

}  // namespace attn::server

#endif  // ATTN_SERVER_SESSIONS_SESSION_MEMORY_H_
