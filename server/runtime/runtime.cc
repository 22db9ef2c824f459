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
#include "core/status_util.h"

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
  return runtime;
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
  const std::vector<bool> health = scheduler_->worker_health();
  const auto& executors = scheduler_->executors();
  for (size_t i = 0; i < executors.size(); ++i) {
    snapshot.workers.push_back({executors[i]->Name(), i < health.size() && health[i]});
  }
  return snapshot;
}

}  // namespace attn::server
