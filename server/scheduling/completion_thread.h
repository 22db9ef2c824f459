// server/scheduling/completion_thread.h
//
// CompletionThread: one thread that runs posted closures in the order they
// were posted. Each scheduler worker hands its finished jobs' `done` calls
// to its own CompletionThread, so the worker starts its next job while the
// last one's response is built and handed to gRPC. That hand-off is not
// free: Finish() on a callback call starts the write on the calling thread
// (chttp2 sends the first megabytes of a large response there), and
// releasing a request returns its slices (tens of MiB) to the allocator.
// On the H200 at S=4096 and concurrency 32 (bench/RESULTS.md), a stream
// took about 10.6 ms a request where its copies, kernel and output took
// 6.5 ms, and requests waited 65 ms in the queue.
//
// Destruction runs everything already posted, then joins.
#ifndef ATTN_SERVER_COMPLETION_THREAD_H_
#define ATTN_SERVER_COMPLETION_THREAD_H_

#include <deque>
#include <thread>

#include "absl/base/thread_annotations.h"
#include "absl/functional/any_invocable.h"
#include "absl/synchronization/mutex.h"

namespace attn::server {

class CompletionThread {
 public:
  CompletionThread();
  // Runs what is posted, then joins.
  ~CompletionThread();

  CompletionThread(const CompletionThread&) = delete;
  CompletionThread& operator=(const CompletionThread&) = delete;

  // Runs `fn` on this thread after everything posted before it.
  void Post(absl::AnyInvocable<void() &&> fn);

 private:
  void Loop();

  absl::Mutex mu_;
  std::deque<absl::AnyInvocable<void() &&>> pending_ ABSL_GUARDED_BY(mu_);
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  std::thread thread_;  // last: starts once the members above exist
};

}  // namespace attn::server

#endif  // ATTN_SERVER_COMPLETION_THREAD_H_
