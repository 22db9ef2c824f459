// OutputBufferPool: output buffers reused across a load level's requests,
// so the load generator can receive O the way the Python client does and a
// client that reuses its output tensors would (AttendOptions::
// out_destination), instead of into a fresh string per response, whose
// pages fault in and are zeroed first. Why it may matter: on the H200 the
// Python client outran attn_loadgen at B=1, S=4096 (102.8 against 74.9
// requests/s at concurrency 1; bench/RESULTS.md 2026-12-02 third run).
// On a 2-core machine against --backend=transport_only, reused buffers
// gave 23.9 / 25.2 requests/s at concurrency 1 against 21.9 / 22.4 fresh:
// within the noise of such a machine, so --reuse_output_buffers is off by
// default until it is measured on a GPU host.
//
// Thread-safe. Buffers are never freed while the pool lives; the pool grows
// to the most requests in flight at once.
#ifndef ATTN_CLIENT_LOADGEN_OUTPUT_BUFFER_POOL_H_
#define ATTN_CLIENT_LOADGEN_OUTPUT_BUFFER_POOL_H_

#include <cstddef>
#include <memory>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"

namespace attn::loadgen {

class OutputBufferPool {
 public:
  explicit OutputBufferPool(size_t bytes) : bytes_(bytes) {}

  // A buffer of bytes() bytes no one else holds: a returned one, else new.
  std::unique_ptr<char[]> Take();
  // Returns a buffer taken from this pool.
  void Give(std::unique_ptr<char[]> buffer);

  size_t bytes() const { return bytes_; }
  // Buffers allocated so far.
  int allocated() const;

 private:
  const size_t bytes_;
  mutable absl::Mutex mu_;
  std::vector<std::unique_ptr<char[]>> free_ ABSL_GUARDED_BY(mu_);
  int allocated_ ABSL_GUARDED_BY(mu_) = 0;
};

}  // namespace attn::loadgen

#endif  // ATTN_CLIENT_LOADGEN_OUTPUT_BUFFER_POOL_H_
