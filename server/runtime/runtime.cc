#include "runtime/runtime.h"

#include <algorithm>
#include <random>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "backends/backend.h"
#include "backends/cuda_executor.h"
#include "backends/fault_injecting_executor.h"
#include "backends/heap_arena.h"
#include "core/log.h"
#include "core/status_util.h"
#include "absl/time/clock.h"

namespace attn::server {
namespace {

std::string RandomPrefix() {
  std::random_device device;
  return absl::StrFormat("%08x", device());
}

std::string HumanBytes(int64_t bytes) {
  if (bytes >= (int64_t{1} << 30)) return absl::StrFormat("%.1f GiB", bytes / 1073741824.0);
  if (bytes >= (int64_t{1} << 20)) return absl::StrFormat("%.1f MiB", bytes / 1048576.0);
  return absl::StrFormat("%.1f KiB", bytes / 1024.0);
}

}  // namespace

Runtime::Runtime(const ServerOptions& options, std::shared_ptr<const KernelCatalog> catalog)
    : options_(options),
      catalog_(std::move(catalog)),
      admission_(AdmissionLimits{options.limits.AdmittedBudget(),
                                 options.limits.StreamBufferBudget(),
                                 options.limits.max_peer_share}),
      stream_watchdog_(StreamWatchdog::Timeouts{options.stream_idle_timeout,
                                                options.stream_upload_timeout,
                                                options.drain_upload_idle}),
      id_prefix_(RandomPrefix()) {}

absl::StatusOr<std::unique_ptr<Runtime>> Runtime::Create(const ServerOptions& options,
                                                         absl::AnyInvocable<void()> on_all_failed) {
  ASSIGN_OR_RETURN(BackendSetup setup, CreateBackend(options));
  RETURN_IF_ERROR(InjectWorkerFaults(options.test_worker_faults, &setup.executors));
  std::unique_ptr<Runtime> runtime(new Runtime(options, std::move(setup.catalog)));
  runtime->devices_ = std::move(setup.devices);
  runtime->choice_reason_ = std::move(setup.choice_reason);
  runtime->backend_name_ = setup.backend_name.empty()
                               ? std::string(BackendName(runtime->catalog_->backend()))
                               : std::move(setup.backend_name);
  runtime->scheduler_ = std::make_unique<Scheduler>(
      std::move(setup.executors), options.limits.queue_capacity, std::move(on_all_failed),
      BatchPolicy{options.batch_delay, options.max_batch_size}, options.completion_threads);
  runtime->region_backend_ = setup.region_backend != nullptr
                                 ? std::move(setup.region_backend)
                                 : std::make_unique<HostRegionBackend>();
  if (options.allow_shared_memory) {
    runtime->regions_ = std::make_unique<RegionRegistry>(options.max_regions_per_lease);
  }
  runtime->StartSessions(std::move(setup.session_memory), std::move(setup.sessions_off_reason));
  return runtime;
}

void Runtime::StartSessions(std::unique_ptr<SessionMemory> memory, std::string off_reason) {
  if (memory == nullptr) {
    sessions_off_reason_ = std::move(off_reason);
    return;
  }
  const ServerOptions& o = options_;
  session_memory_ = std::move(memory);
  session_pool_ = session_memory_->layout();
  SessionLimits limits;
  limits.page_bytes = session_pool_.page_bytes;
  limits.max_session_tokens = o.max_session_tokens;
  limits.max_steps_per_call = o.max_steps_per_call;
  limits.max_sessions_per_lease = o.max_sessions_per_lease;
  limits.max_step_block_entries = StepBlockEntries(o.max_steps_per_call, session_pool_.num_pages);
  limits.idle_timeout = absl::Seconds(o.session_idle_timeout_s);
  SessionMemory* pages = session_memory_.get();
  sessions_ = std::make_unique<SessionRegistry>(
      limits, std::make_unique<PagePool>(session_pool_.num_pages),
      [pages](int32_t dst, int32_t src, int64_t bytes) { return pages->CopyPage(dst, src, bytes); });
  LOGF(kInfo, "KV-cache sessions: %d pages of %s on %s (--kv_cache_bytes, --kv_page_bytes)",
       session_pool_.num_pages, HumanBytes(session_pool_.page_bytes),
       session_pool_.device < 0 ? std::string("the host")
                                : absl::StrFormat("cuda:%d", session_pool_.device));
  if (limits.idle_timeout > absl::ZeroDuration()) {
    expiry_thread_ = std::thread([this] {
      absl::MutexLock lock(&expiry_mu_);
      while (!expiry_mu_.AwaitWithTimeout(absl::Condition(&expiry_stop_), absl::Seconds(1))) {
        const int64_t expired = sessions_->ExpireIdle(absl::Now());
        if (expired > 0) LOGF(kInfo, "%d idle sessions closed (--session_idle_timeout_s)", expired);
      }
    });
  }
}

Runtime::~Runtime() {
  {
    absl::MutexLock lock(&expiry_mu_);
    expiry_stop_ = true;
  }
  if (expiry_thread_.joinable()) expiry_thread_.join();
}

std::string Runtime::NextRequestId() {
  return absl::StrCat(id_prefix_, "-", next_id_.fetch_add(1, std::memory_order_relaxed));
}

std::string Runtime::Describe() const {
  std::vector<std::string> workers;
  for (const auto& executor : scheduler_->executors()) workers.push_back(executor->Name());
  std::vector<std::string> devices;
  for (const DeviceInfo& d : devices_) {
    devices.push_back(absl::StrFormat("cuda:%d %s (sm_%d%d)", d.ordinal, d.name, d.compute_major,
                                      d.compute_minor));
  }
  return absl::StrFormat(
      "backend=%s (%s) devices=[%s] workers=[%s] default_kernel=%s max_tokens_per_request=%d "
      "(%s per tensor) max_message_bytes=%d queue_capacity=%d max_stream_buffer_bytes=%d "
      "max_admitted_bytes=%d max_peer_share=%g stream_idle_timeout=%s stream_upload_timeout=%s "
      "max_concurrent_streams=%d",
      backend_name(), choice_reason_, absl::StrJoin(devices, ", "), absl::StrJoin(workers, ", "),
      catalog_->default_kernel().info().name, options_.limits.max_tokens_per_request,
      HumanBytes(options_.limits.MaxTensorBytes()), options_.limits.max_message_bytes,
      options_.limits.queue_capacity, admission_.limits().stream_bytes, admission_.limits().admitted_bytes,
      admission_.limits().peer_share, absl::FormatDuration(options_.stream_idle_timeout),
      absl::FormatDuration(options_.stream_upload_timeout), options_.max_concurrent_streams);
}

LoadSnapshot Runtime::Load() const {
  LoadSnapshot snapshot;
  const Scheduler::Load load = scheduler_->load();
  snapshot.queued = load.queued;
  snapshot.running = load.running;
  snapshot.batched_launches = load.batched_launches;
  snapshot.batched_requests = load.batched_requests;
  snapshot.stream_buffer_bytes = admission_.stream_used();
  snapshot.stream_buffer_limit_bytes = admission_.limits().stream_bytes;
  snapshot.admitted_bytes = admission_.admitted_used();
  snapshot.admitted_limit_bytes = admission_.limits().admitted_bytes;
  const PinnedHeapUsage heap = ReadPinnedHeapUsage();
  snapshot.pinned_heap_bytes = heap.arena_bytes;
  snapshot.pinned_heap_used_bytes = heap.used_bytes;
  snapshot.pinned_heap_overflows = heap.overflows;
  if (sessions_ != nullptr) {
    const SessionRegistry::Counters c = sessions_->counters();
    snapshot.sessions = c.sessions;
    snapshot.kv_pages_total = sessions_->pool().pages_total();
    snapshot.kv_pages_used = sessions_->pool().pages_used();
    snapshot.kv_tokens_cached = c.tokens_cached;
    snapshot.session_steps = c.steps;
    snapshot.session_tokens_appended = c.tokens_appended;
    snapshot.session_forks = c.forks;
    snapshot.sessions_expired = c.expired;
    snapshot.rejected_pool_full = c.rejected_pool_full;
  }
  const std::vector<bool> health = scheduler_->worker_health();
  const auto& executors = scheduler_->executors();
  for (size_t i = 0; i < executors.size(); ++i) {
    snapshot.workers.push_back({executors[i]->Name(), i < health.size() && health[i]});
  }
  return snapshot;
}

}  // namespace attn::server
