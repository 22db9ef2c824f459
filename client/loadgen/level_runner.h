// Runs one load level against attnserve and records every request.
//
// Closed loop: `concurrency` requests are kept in flight; each completion
// sends the next one (from the gRPC callback, so one thread drives any
// concurrency). Open loop: requests are sent on an ArrivalSchedule at
// `rate` per second regardless of responses, up to `max_in_flight` at once;
// each request's latency counts from when it was *due*, so a server that
// falls behind shows its queueing in the latencies instead of slowing the
// client down (coordinated omission). A send later than `late_tolerance`
// after its due time is "late".
//
// A level is warm-up (not recorded) followed by the measurement window;
// requests belong to the phase in which they were due. Sending stops at the
// end of the window or after `max_requests` measured requests, whichever
// comes first; nothing is sent after the window closes (open-loop requests
// still due then are counted as unsent). The level ends when every request
// sent has finished, and each carries a deadline, so a level always ends.
// The server's counters are read when the window opens, before its first
// request is sent (measured requests wait for that read), and after the level.
#ifndef ATTN_CLIENT_LOADGEN_LEVEL_RUNNER_H_
#define ATTN_CLIENT_LOADGEN_LEVEL_RUNNER_H_

#include <atomic>
#include <cstdint>
#include <memory>
#include <optional>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "arrival_schedule.h"
#include "attn/client/attention_client.h"
#include "output_buffer_pool.h"

namespace attn::loadgen {

enum class LoadMode { kClosedLoop, kOpenLoop };

struct LevelSpec {
  LoadMode mode = LoadMode::kClosedLoop;
  int concurrency = 1;  // closed loop: requests in flight
  double rate = 0.0;    // open loop: requests per second
  Arrivals arrivals = Arrivals::kConstant;
  absl::Duration warmup = absl::Seconds(1);
  absl::Duration duration = absl::Seconds(5);
  int64_t max_requests = 0;  // measured requests; 0 = no bound but the duration
  int max_in_flight = 256;   // open loop: sends wait beyond this (and turn late)
  absl::Duration late_tolerance = absl::Milliseconds(1);
  uint64_t seed = 1;  // Poisson arrivals
};

// One finished request. Times are nanoseconds since the level started.
struct RequestRecord {
  int64_t due_ns = 0;   // open loop: scheduled send; closed loop: = sent_ns
  int64_t sent_ns = 0;  // when AttendAsync was called
  int64_t done_ns = 0;  // when the result arrived
  absl::StatusCode code = absl::StatusCode::kOk;
  bool streamed = false;
  ServerTiming server;  // OK requests only
  ClientTiming client;  // OK requests only
};

struct LevelRun {
  LevelSpec spec;
  int64_t window_start_ns = 0;  // end of warm-up
  int64_t send_stop_ns = 0;     // when measured sending ended
  int64_t warmup_requests = 0;  // sent during warm-up (not recorded)
  // Open loop: requests due in the window that were never sent because
  // max_in_flight requests were still outstanding when the window closed.
  int64_t unsent_requests = 0;
  std::vector<RequestRecord> records;  // measured requests, in order of due time
  // GetStats before the window's first request and after the level (when
  // available).
  std::optional<attnserve::v1::ServerStats> stats_before;
  std::optional<attnserve::v1::ServerStats> stats_after;
};

// Counters for a progress display, readable while a level runs.
struct LevelProgress {
  int64_t elapsed_ns = 0;
  int64_t window_start_ns = 0;
  int64_t window_end_ns = 0;
  int64_t sent = 0;  // measured
  int64_t ok = 0;
  int64_t failed = 0;
  int64_t in_flight = 0;
};

class LevelRunner {
 public:
  // Requests go to `clients` round robin (one client per connection); every
  // call sends `inputs` with `call`. The clients must outlive the runner.
  LevelRunner(std::vector<AttentionClient*> clients,
              std::shared_ptr<const AttentionInputs> inputs, AttendOptions call);
  // The same with the calls taken round robin (e.g. each writing its output
  // into another shared-memory slot); `calls` must not be empty.
  LevelRunner(std::vector<AttentionClient*> clients,
              std::shared_ptr<const AttentionInputs> inputs, std::vector<AttendOptions> calls);

  // From the next level on, inline outputs (calls without an out_ref) are
  // written into buffers taken from `outputs` (QBytes() of the inputs each;
  // it must outlive the runner) instead of each result's own string.
  void WriteOutputsInto(OutputBufferPool* outputs) { outputs_ = outputs; }

  // Runs one level to completion. Not reentrant: one level at a time.
  LevelRun Run(const LevelSpec& spec);

  // Thread-safe snapshot of the level in progress.
  LevelProgress Progress() const;

 private:
  int64_t Elapsed() const;
  // Sends one request due at `due` (nullopt: now, the closed loop's case);
  // `measured` decides whether it is recorded. `after` runs once the
  // request finished and was recorded.
  void Send(std::optional<int64_t> due, bool measured, absl::AnyInvocable<void() &&> after);
  // Closed loop: one slot's next request, or the slot's end.
  void NextClosedLoopRequest();
  // Open loop: sends on the schedule; counts never-sent requests in `unsent`.
  void RunOpenLoop(int64_t* unsent);
  // At the window's start (on its own thread): takes GetStats into `run`,
  // then opens the window and resumes the closed-loop slots parked on it.
  void SnapshotStatsAtWindowStart(LevelRun* run);

  const std::vector<AttentionClient*> clients_;
  const std::shared_ptr<const AttentionInputs> inputs_;
  const std::vector<AttendOptions> calls_;
  OutputBufferPool* outputs_ = nullptr;  // null: outputs into each result
  std::atomic<uint64_t> next_client_{0};
  std::atomic<uint64_t> next_call_{0};

  LevelSpec spec_;
  int64_t start_ns_ = 0;  // monotonic time the level started
  int64_t window_start_ns_ = 0;
  int64_t window_end_ns_ = 0;

  mutable absl::Mutex mu_;
  int64_t in_flight_ ABSL_GUARDED_BY(mu_) = 0;
  int64_t measured_sent_ ABSL_GUARDED_BY(mu_) = 0;
  int64_t warmup_sent_ ABSL_GUARDED_BY(mu_) = 0;
  int64_t ok_ ABSL_GUARDED_BY(mu_) = 0;
  int64_t failed_ ABSL_GUARDED_BY(mu_) = 0;
  int64_t send_stop_ns_ ABSL_GUARDED_BY(mu_) = -1;
  bool window_open_ ABSL_GUARDED_BY(mu_) = false;  // stats_before taken
  int64_t parked_ ABSL_GUARDED_BY(mu_) = 0;        // closed-loop slots waiting for it
  std::vector<RequestRecord> records_ ABSL_GUARDED_BY(mu_);
};

}  // namespace attn::loadgen

#endif  // ATTN_CLIENT_LOADGEN_LEVEL_RUNNER_H_
