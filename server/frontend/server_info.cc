#include "frontend/server_info.h"

#include <algorithm>
#include <string>

#include "absl/strings/str_cat.h"
#include "backends/cuda_executor.h"
#include "frontend/tensor_codec.h"
#include "google/protobuf/stubs/common.h"
#include "grpcpp/grpcpp.h"

#ifndef ATTN_VERSION
#define ATTN_VERSION "unknown"
#endif

namespace attn::server {

namespace pb = ::attnserve::v1;

void FillServerInfo(const Runtime& runtime, pb::ServerInfo* info) {
  const ServerOptions& options = runtime.options();
  const Admission& admission = runtime.admission();
  info->set_version(ATTN_VERSION);
  info->set_backend(std::string(runtime.backend_name()));
  for (const DeviceInfo& device : runtime.devices()) {
    pb::DeviceDescriptor* d = info->add_devices();
    d->set_ordinal(device.ordinal);
    d->set_name(device.name);
    d->set_compute_major(device.compute_major);
    d->set_compute_minor(device.compute_minor);
    d->set_multiprocessors(device.multiprocessors);
    d->set_total_memory_bytes(device.total_memory_bytes);
  }
  pb::ServerLimits* limits = info->mutable_limits();
  limits->set_max_message_bytes(options.limits.max_message_bytes);
  limits->set_max_tokens_per_request(options.limits.max_tokens_per_request);
  limits->set_max_request_bytes(3 * options.limits.MaxTensorBytes());
  limits->set_queue_capacity(options.limits.queue_capacity);
  limits->set_workers(runtime.scheduler().workers());
  limits->set_max_stream_buffer_bytes(admission.limits().stream_bytes);
  limits->set_stream_chunk_bytes(options.stream_chunk_bytes);
  limits->set_max_admitted_bytes(admission.limits().admitted_bytes);
  limits->set_stream_idle_timeout_s(absl::ToDoubleSeconds(options.stream_idle_timeout));
  limits->set_stream_upload_timeout_s(absl::ToDoubleSeconds(options.stream_upload_timeout));
  limits->set_max_concurrent_streams(options.max_concurrent_streams);
  pb::SharedMemoryInfo* shm = info->mutable_shared_memory();
  shm->set_enabled(runtime.regions() != nullptr);
  shm->set_cuda_regions(runtime.regions() != nullptr && runtime.region_backend().cuda_regions());
  shm->set_max_regions_per_lease(options.max_regions_per_lease);
  shm->set_alignment_bytes(kRegionAlignment);
  pb::SessionsInfo* sessions = info->mutable_sessions();
  sessions->set_enabled(runtime.sessions() != nullptr);
  if (runtime.sessions() != nullptr) {
    sessions->set_page_bytes(options.kv_page_bytes);
    sessions->set_pages_total(runtime.sessions()->pool().pages_total());
    sessions->set_max_session_tokens(options.max_session_tokens);
    sessions->set_max_steps_per_call(options.max_steps_per_call);
    sessions->set_max_sessions_per_lease(options.max_sessions_per_lease);
    sessions->set_idle_timeout_s(options.session_idle_timeout_s);
  }
  info->set_default_kernel(runtime.catalog().default_kernel().info().name);
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

void FillKernels(const KernelCatalog& catalog, pb::ListKernelsResponse* response) {
  const std::string& default_name = catalog.default_kernel().info().name;
  for (const KernelHandle& handle : catalog.kernels()) {
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

void FillStats(const Runtime& runtime, pb::ServerStats* stats) {
  const LoadSnapshot load = runtime.Load();
  const Stats::Snapshot counters = runtime.stats().Read();
  stats->set_uptime_ns(counters.uptime_ns);
  stats->set_requests_ok(counters.ok);
  stats->set_requests_failed(counters.failed);
  stats->set_rejected_queue_full(counters.queue_full);
  stats->set_rejected_deadline(counters.deadline);
  stats->set_rejected_cancelled(counters.cancelled);
  stats->set_cancelled_by_drain(counters.drain);
  stats->set_upload_timeouts(counters.upload_timeouts);
  stats->set_rejected_over_budget(counters.over_budget);
  stats->set_in_flight(load.queued + load.running);
  stats->set_queued(load.queued);
  stats->set_bytes_in(counters.bytes.in);
  stats->set_bytes_out(counters.bytes.out);
  stats->set_region_bytes_in(counters.bytes.region_in);
  stats->set_region_bytes_out(counters.bytes.region_out);
  PhaseTimes sums = counters.sums;
  sums.batch_size = 0;
  ToProto(sums, stats->mutable_cumulative());
  stats->set_stream_buffer_bytes(load.stream_buffer_bytes);
  stats->set_admitted_bytes(load.admitted_bytes);
  stats->set_regions(runtime.regions() != nullptr ? runtime.regions()->regions() : 0);
  stats->set_batched_launches(load.batched_launches);
  stats->set_batched_requests(load.batched_requests);
  stats->set_sessions(load.sessions);
  stats->set_kv_pages_total(load.kv_pages_total);
  stats->set_kv_pages_used(load.kv_pages_used);
  stats->set_kv_tokens_cached(load.kv_tokens_cached);
  stats->set_session_steps(load.session_steps);
  stats->set_session_tokens_appended(load.session_tokens_appended);
  stats->set_session_forks(load.session_forks);
  stats->set_sessions_expired(load.sessions_expired);
  stats->set_rejected_pool_full(load.rejected_pool_full);
}

}  // namespace attn::server
