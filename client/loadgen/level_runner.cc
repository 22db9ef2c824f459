#include "level_runner.h"

#include <algorithm>
#include <chrono>
#include <thread>
#include <utility>

namespace attn::loadgen {
namespace {

int64_t MonotonicNanos() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

}  // namespace

LevelRunner::LevelRunner(std::vector<AttentionClient*> clients,
                         std::shared_ptr<const AttentionInputs> inputs, AttendOptions call)
    : LevelRunner(std::move(clients), std::move(inputs),
                  std::vector<AttendOptions>{std::move(call)}) {}

LevelRunner::LevelRunner(std::vector<AttentionClient*> clients,
                         std::shared_ptr<const AttentionInputs> inputs,
                         std::vector<AttendOptions> calls)
    : clients_(std::move(clients)), inputs_(std::move(inputs)), calls_(std::move(calls)) {}

int64_t LevelRunner::Elapsed() const { return MonotonicNanos() - start_ns_; }

LevelRun LevelRunner::Run(const LevelSpec& spec) {
  spec_ = spec;
  {
    // Under the lock: Progress() may be reading these from another thread.
    // Completion callbacks read them unlocked, but only after the sends
    // below, which order these writes before them.
    absl::MutexLock lock(&mu_);
    window_start_ns_ = absl::ToInt64Nanoseconds(spec.warmup);
    window_end_ns_ = window_start_ns_ + absl::ToInt64Nanoseconds(spec.duration);
    in_flight_ = measured_sent_ = warmup_sent_ = ok_ = failed_ = 0;
    send_stop_ns_ = -1;
    window_open_ = false;
    parked_ = 0;
    records_.clear();
    start_ns_ = MonotonicNanos();
  }
  LevelRun run;
  run.spec = spec;

  std::thread stats_thread([this, &run] { SnapshotStatsAtWindowStart(&run); });

  if (spec.mode == LoadMode::kClosedLoop) {
    {
      absl::MutexLock lock(&mu_);
      in_flight_ = spec.concurrency;
    }
    for (int i = 0; i < spec.concurrency; ++i) NextClosedLoopRequest();
  } else {
    run.unsent_requests = 0;
    RunOpenLoop(&run.unsent_requests);
  }
  {
    absl::MutexLock lock(&mu_);
    mu_.Await(absl::Condition(+[](int64_t* n) { return *n == 0; }, &in_flight_));
  }
  stats_thread.join();
  absl::StatusOr<attnserve::v1::ServerStats> stats = clients_.front()->GetStats();
  if (stats.ok()) run.stats_after = *std::move(stats);

  absl::MutexLock lock(&mu_);
  run.window_start_ns = window_start_ns_;
  run.send_stop_ns = send_stop_ns_ >= 0 ? send_stop_ns_ : window_end_ns_;
  run.warmup_requests = warmup_sent_;
  run.records = std::move(records_);
  records_.clear();
  std::sort(run.records.begin(), run.records.end(),
            [](const RequestRecord& a, const RequestRecord& b) { return a.due_ns < b.due_ns; });
  return run;
}

void LevelRunner::SnapshotStatsAtWindowStart(LevelRun* run) {
  const int64_t wait = window_start_ns_ - Elapsed();
  if (wait > 0) absl::SleepFor(absl::Nanoseconds(wait));
  absl::StatusOr<attnserve::v1::ServerStats> stats = clients_.front()->GetStats();
  if (stats.ok()) run->stats_before = *std::move(stats);
  int64_t parked;
  {
    absl::MutexLock lock(&mu_);
    window_open_ = true;
    parked = parked_;
    parked_ = 0;
  }
  for (int64_t i = 0; i < parked; ++i) NextClosedLoopRequest();
}

LevelProgress LevelRunner::Progress() const {
  absl::MutexLock lock(&mu_);
  LevelProgress progress;
  progress.elapsed_ns = Elapsed();
  progress.window_start_ns = window_start_ns_;
  progress.window_end_ns = window_end_ns_;
  progress.sent = measured_sent_;
  progress.ok = ok_;
  progress.failed = failed_;
  progress.in_flight = in_flight_;
  return progress;
}

void LevelRunner::Send(std::optional<int64_t> due, bool measured,
                       absl::AnyInvocable<void() &&> after) {
  AttentionClient* client = clients_[next_client_++ % clients_.size()];
  const int64_t sent_ns = Elapsed();
  const int64_t due_ns = due.value_or(sent_ns);
  AttendOptions call = calls_[next_call_++ % calls_.size()];
  std::unique_ptr<char[]> output;  // held until the request is over
  if (outputs_ != nullptr && !call.out_ref.set()) {
    output = outputs_->Take();
    call.out_destination = output.get();
  }
  client->AttendAsync(
      inputs_, call,
      [this, due_ns, sent_ns, measured, output = std::move(output),
       after = std::move(after)](absl::StatusOr<AttendResult> result) mutable {
        RequestRecord record;
        record.due_ns = due_ns;
        record.sent_ns = sent_ns;
        record.done_ns = Elapsed();
        record.code = result.status().code();
        if (result.ok()) {
          record.streamed = result->client.streamed;
          record.server = result->server;
          record.client = result->client;
        }
        result = absl::CancelledError();  // frees the output before the next send
        if (output != nullptr) outputs_->Give(std::move(output));
        if (measured) {
          absl::MutexLock lock(&mu_);
          records_.push_back(record);
          ++(record.code == absl::StatusCode::kOk ? ok_ : failed_);
        }
        std::move(after)();
      });
}

void LevelRunner::NextClosedLoopRequest() {
  const int64_t now = Elapsed();
  bool measured;
  {
    absl::MutexLock lock(&mu_);
    const bool count_reached = spec_.max_requests > 0 && measured_sent_ >= spec_.max_requests;
    if (now >= window_end_ns_ || count_reached) {
      --in_flight_;  // this slot is done
      return;
    }
    measured = now >= window_start_ns_;
    if (measured && !window_open_) {
      ++parked_;  // sent once the window's starting stats are taken
      return;
    }
    if (!measured) {
      ++warmup_sent_;
    } else if (++measured_sent_ == spec_.max_requests) {
      send_stop_ns_ = now;
    }
  }
  Send(std::nullopt, measured, [this]() { NextClosedLoopRequest(); });
}

void LevelRunner::RunOpenLoop(int64_t* unsent) {
  ArrivalSchedule schedule(spec_.arrivals, spec_.rate, spec_.seed);
  const int64_t max_in_flight = std::max(spec_.max_in_flight, 1);
  bool window_closed = false;
  for (int64_t due = schedule.Next(); due < window_end_ns_; due = schedule.Next()) {
    const bool measured = due >= window_start_ns_;
    if (window_closed) {
      *unsent += measured ? 1 : 0;
      continue;
    }
    {
      absl::MutexLock lock(&mu_);
      if (measured && spec_.max_requests > 0 && measured_sent_ >= spec_.max_requests) break;
    }
    const int64_t wait = due - Elapsed();
    if (wait > 0) absl::SleepFor(absl::Nanoseconds(wait));
    {
      absl::MutexLock lock(&mu_);
      // A measured request also waits for the window's starting stats.
      auto below_cap = [this, max_in_flight, measured]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
        return in_flight_ < max_in_flight && (window_open_ || !measured);
      };
      const absl::Time window_end =
          absl::Now() + absl::Nanoseconds(window_end_ns_ - Elapsed());
      if (!mu_.AwaitWithDeadline(absl::Condition(&below_cap), window_end) ||
          Elapsed() >= window_end_ns_) {
        window_closed = true;  // the server kept max_in_flight busy to the end
        *unsent += measured ? 1 : 0;
        continue;
      }
      ++in_flight_;
      if (!measured) {
        ++warmup_sent_;
      } else if (++measured_sent_ == spec_.max_requests) {
        send_stop_ns_ = Elapsed();
      }
    }
    Send(due, measured, [this]() {
      absl::MutexLock lock(&mu_);
      --in_flight_;
    });
  }
  // Under a request bound, requests past it would not have been sent anyway.
  if (spec_.max_requests > 0) {
    absl::MutexLock lock(&mu_);
    *unsent = std::min(*unsent, std::max<int64_t>(spec_.max_requests - measured_sent_, 0));
  }
}

}  // namespace attn::loadgen
