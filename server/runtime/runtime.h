// server/runtime.h
//
// Runtime: everything behind the RPC front end for the server's lifetime:
// the backend's kernel catalog and devices, the scheduler with its
// executors, the counters, and the AttendStream byte budget. Created once
// the server listens (slow: CUDA buffers and warm-up); thread-safe.
#ifndef ATTN_SERVER_RUNTIME_H_
#define ATTN_SERVER_RUNTIME_H_

#include <atomic>
#include <thread>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "attn/device.h"
#include "scheduling/admission.h"
#include "backends/kernel_catalog.h"
#include "limits/stream_watchdog.h"
#include "scheduling/scheduler.h"
#include "core/server_options.h"
#include "observability/load_snapshot.h"
#include "observability/metrics_sink.h"
#include "observability/stats.h"
#include "regions/region_backend.h"
#include "regions/region_registry.h"
#include "sessions/session_registry.h"
#include "sessions/step_args.h"

namespace attn::server {

class Runtime {
 public:
  // `on_all_failed` runs (on a worker thread) if every executor fails.
  static absl::StatusOr<std::unique_ptr<Runtime>> Create(
      const ServerOptions& options, absl::AnyInvocable<void()> on_all_failed = nullptr);

  const ServerOptions& options() const { return options_; }
  const Limits& limits() const { return options_.limits; }
  const KernelCatalog& catalog() const { return *catalog_; }
  absl::string_view backend_name() const { return backend_name_; }
  Scheduler& scheduler() { return *scheduler_; }
  const Scheduler& scheduler() const { return *scheduler_; }
  Stats& stats() { return stats_; }
  const Stats& stats() const { return stats_; }
  // The byte budgets every call is admitted against (--max_admitted_bytes,
  // --max_stream_buffer_bytes, --max_peer_share).
  Admission& admission() { return admission_; }
  const Admission& admission() const { return admission_; }
  StreamWatchdog& stream_watchdog() { return stream_watchdog_; }
  // Shared-memory regions; null unless --allow_shared_memory.
  RegionRegistry* regions() { return regions_.get(); }
  const RegionRegistry* regions() const { return regions_.get(); }
  // KV-cache sessions; null when off (--kv_cache_bytes=0, or a backend
  // without a session pool: BackendSetup::sessions_off_reason).
  // `session_pool()` is where its pages are (host or device memory).
  SessionRegistry* sessions() { return sessions_.get(); }
  const SessionRegistry* sessions() const { return sessions_.get(); }
  const PoolLayout& session_pool() const { return session_pool_; }
  // Why sessions() is null, for the refusal.
  const std::string& sessions_off_reason() const { return sessions_off_reason_; }
  // How this backend maps region memory (page-locking, CUDA IPC).
  RegionBackend& region_backend() { return *region_backend_; }
  const RegionBackend& region_backend() const { return *region_backend_; }

  // The server is cancelling the calls still in flight (its drain timeout
  // passed): a call cancelled from now on was ended by the server.
  void BeginCancellingCalls() { cancelling_calls_.store(true, std::memory_order_release); }
  bool cancelling_calls() const { return cancelling_calls_.load(std::memory_order_acquire); }

  // A server-made request id for requests that bring none: "<prefix>-<n>",
  // the prefix random per process.
  std::string NextRequestId();

  // The CUDA devices served (empty on the CPU backend).
  const std::vector<DeviceInfo>& devices() const { return devices_; }

  // Queue, byte budgets and worker health, read now (GetStats and metrics).
  LoadSnapshot Load() const;

  // Where RecordOutcome also sends each call's end (null: nowhere). Set it
  // before calls arrive; the sink must outlive this runtime.
  void SetMetricsSink(MetricsSink* sink) { metrics_sink_.store(sink, std::memory_order_release); }
  MetricsSink* metrics_sink() const { return metrics_sink_.load(std::memory_order_acquire); }

  // Backend, devices, workers and limits on one line.
  std::string Describe() const;

  // Refuses new jobs; queued ones still run. The destructor joins workers.
  void Stop() { scheduler_->Stop(); }

 private:
  Runtime(const ServerOptions& options, std::shared_ptr<const KernelCatalog> catalog);
  // The session registry over the backend's page pool memory (null: off,
  // for `off_reason`).
  void StartSessions(std::unique_ptr<SessionMemory> memory, std::string off_reason);

  const ServerOptions options_;
  const std::shared_ptr<const KernelCatalog> catalog_;  // never null
  std::vector<DeviceInfo> devices_;
  std::string choice_reason_;
  std::string backend_name_;
  std::unique_ptr<Scheduler> scheduler_;
  Stats stats_;
  Admission admission_;
  StreamWatchdog stream_watchdog_;
  std::atomic<bool> cancelling_calls_{false};
  std::atomic<MetricsSink*> metrics_sink_{nullptr};
  std::string id_prefix_;
  std::atomic<uint64_t> next_id_{1};
  // Last, so regions are unmapped before the executors and devices go.
  std::unique_ptr<RegionBackend> region_backend_;
  std::unique_ptr<RegionRegistry> regions_;
  // Sessions: the pool's memory, then the registry over it, then the
  // thread that expires idle sessions (stopped first).
  std::unique_ptr<SessionMemory> session_memory_;
  PoolLayout session_pool_;
  std::unique_ptr<SessionRegistry> sessions_;
  std::string sessions_off_reason_;
  absl::Mutex expiry_mu_;
  bool expiry_stop_ ABSL_GUARDED_BY(expiry_mu_) = false;
  std::thread expiry_thread_;

 public:
  ~Runtime();
};

}  // namespace attn::server

#endif  // ATTN_SERVER_RUNTIME_H_
