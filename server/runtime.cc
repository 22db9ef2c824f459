#include "runtime.h"

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
#include "google/protobuf/stubs/common.h"
#include "grpcpp/grpcpp.h"
#include "status_util.h"
#include "frontend/tensor_codec.h"

#ifndef ATTN_VERSION
#define ATTN_VERSION "unknown"
#endif

namespace attn::server {
namespace {

namespace pb = ::attnserve::v1;

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

Runtime::Runtime(const ServerOptions& options, KernelCatalog catalog)
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
                               ? std::string(BackendName(runtime->catalog_.backend()))
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
      catalog_.default_kernel().info().name, options_.limits.max_tokens_per_request,
      HumanBytes(options_.limits.MaxTensorBytes()), options_.limits.max_message_bytes,
      options_.limits.queue_capacity, admission_.limits().stream_bytes, admission_.limits().admitted_bytes,
      admission_.limits().peer_share, absl::FormatDuration(options_.stream_idle_timeout),
      absl::FormatDuration(options_.stream_upload_timeout), options_.max_concurrent_streams);
}

void Runtime::FillServerInfo(pb::ServerInfo* info) const {
  info->set_version(ATTN_VERSION);
  info->set_backend(std::string(backend_name()));
  for (const DeviceInfo& device : devices_) {
    pb::DeviceDescriptor* d = info->add_devices();
    d->set_ordinal(device.ordinal);
    d->set_name(device.name);
    d->set_compute_major(device.compute_major);
    d->set_compute_minor(device.compute_minor);
    d->set_multiprocessors(device.multiprocessors);
    d->set_total_memory_bytes(device.total_memory_bytes);
  }
  pb::ServerLimits* limits = info->mutable_limits();
  limits->set_max_message_bytes(options_.limits.max_message_bytes);
  limits->set_max_tokens_per_request(options_.limits.max_tokens_per_request);
  limits->set_max_request_bytes(3 * options_.limits.MaxTensorBytes());
  limits->set_queue_capacity(options_.limits.queue_capacity);
  limits->set_workers(scheduler_->workers());
  limits->set_max_stream_buffer_bytes(admission_.limits().stream_bytes);
  limits->set_stream_chunk_bytes(options_.stream_chunk_bytes);
  limits->set_max_admitted_bytes(admission_.limits().admitted_bytes);
  limits->set_stream_idle_timeout_s(absl::ToDoubleSeconds(options_.stream_idle_timeout));
  limits->set_stream_upload_timeout_s(absl::ToDoubleSeconds(options_.stream_upload_timeout));
  limits->set_max_concurrent_streams(options_.max_concurrent_streams);
  pb::SharedMemoryInfo* shm = info->mutable_shared_memory();
  shm->set_enabled(regions_ != nullptr);
  shm->set_cuda_regions(regions_ != nullptr && region_backend_->cuda_regions());
  shm->set_max_regions_per_lease(options_.max_regions_per_lease);
  shm->set_alignment_bytes(kRegionAlignment);
  info->set_default_kernel(catalog_.default_kernel().info().name);
  info->add_dtypes(pb::DTYPE_FLOAT16);
  info->add_dtypes(pb::DTYPE_BFLOAT16);
  info->set_build(absl::StrCat(
#if defined(__clang__)
      "clang ", __clang_version__,
#elif defined(__GNUC__)
      "gcc ", __VERSION__,
#endif
      "; gRPC ", grpc::Version(), "; protobuf ",
      google::protobuf::internal::VersionString(GOOGLE_PROTOBUF_VERSION), "; ",
      CudaVersionString()));
}

void Runtime::FillKernels(pb::ListKernelsResponse* response) const {
  const std::string& default_name = catalog_.default_kernel().info().name;
  for (const KernelHandle& handle : catalog_.kernels()) {
    const KernelInfo& kernel = handle.info();
    const KernelCapabilities& caps = kernel.caps;
    pb::KernelDescriptor* d = response->add_kernels();
    d->set_name(kernel.name);
    d->set_ladder_step(kernel.ladder_step);
    d->set_description(kernel.description);
    d->set_backend(std::string(BackendName(kernel.backend)));
    // The older single-head_dim fields: the one head_dim a kernel takes, or
    // 0 and the largest it takes (head_dims lists them).
    const int max_head_dim = caps.head_dims.empty()
                                 ? static_cast<int>(kMaxCpuHeadDim)
                                 : *std::max_element(caps.head_dims.begin(), caps.head_dims.end());
    d->set_head_dim(caps.head_dims.size() == 1 ? caps.head_dims[0] : 0);
    d->set_max_head_dim(max_head_dim);
    d->set_seq_multiple(caps.seq_multiple);
    d->set_block_m(kernel.block_m);
    d->set_block_n(kernel.block_n);
    d->set_num_warps(kernel.num_warps);
    d->set_is_default(kernel.name == default_name);
    for (int head_dim : caps.head_dims) d->add_head_dims(head_dim);
    d->set_causal(caps.causal);
    d->set_window(caps.window);
    d->set_gqa(caps.gqa);
    d->set_kv_seq_len_differs(caps.seqlen_q_ne_k);
    d->set_lse(caps.lse);
    d->set_varlen(caps.varlen);
    d->set_min_compute_capability(caps.min_compute_capability);
  }
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

void Runtime::FillStats(pb::ServerStats* stats) const {
  const LoadSnapshot load = Load();
  stats_.Fill(load.queued + load.running, load.queued, stats);
  stats->set_stream_buffer_bytes(load.stream_buffer_bytes);
  stats->set_admitted_bytes(load.admitted_bytes);
  stats->set_regions(regions_ != nullptr ? regions_->regions() : 0);
  stats->set_batched_launches(load.batched_launches);
  stats->set_batched_requests(load.batched_requests);
}

}  // namespace attn::server
