#include "backends/backend.h"

#include <algorithm>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "backends/cpu_executor.h"
#include "backends/cuda_executor.h"
#include "backends/cuda_session_memory.h"
#include "backends/heap_arena.h"
#include "backends/pinned_heap_size.h"
#include "backends/output_poison.h"
#include "backends/transport_only_executor.h"
#include "core/log.h"
#include "core/status_util.h"
#include "sessions/step_args.h"

namespace attn::server {
namespace {

// The devices `wanted` names (all usable ones when empty).
absl::StatusOr<std::vector<DeviceInfo>> SelectDevices(const std::vector<int>& wanted) {
  std::vector<DeviceInfo> usable = ListCudaDevices();
  if (usable.empty()) {
    return absl::FailedPreconditionError(
        "--backend=cuda: no usable CUDA device (none visible, no driver, or compute "
        "capability below 8.0)");
  }
  if (wanted.empty()) return usable;
  std::vector<DeviceInfo> selected;
  for (int ordinal : wanted) {
    auto it = std::find_if(usable.begin(), usable.end(),
                           [ordinal](const DeviceInfo& d) { return d.ordinal == ordinal; });
    if (it == usable.end()) {
      return absl::InvalidArgumentError(absl::StrCat(
          "--devices names device ", ordinal, ", which is not a usable CUDA device; usable: ",
          absl::StrJoin(usable, ",", [](std::string* out, const DeviceInfo& d) {
            absl::StrAppend(out, d.ordinal);
          })));
    }
    if (std::any_of(selected.begin(), selected.end(),
                    [ordinal](const DeviceInfo& d) { return d.ordinal == ordinal; })) {
      return absl::InvalidArgumentError(absl::StrCat("--devices names device ", ordinal, " twice"));
    }
    selected.push_back(*it);
  }
  return selected;
}

// Arms the pinned heap (heap_arena.h) as --pinned_heap_bytes says
// (pinned_heap_size.h); `by_default`: this backend uses it unless told not
// to. A size beyond the host's memory is an error; a heap that cannot be
// armed costs only the speed it would have given: logged, not an error.
absl::Status ArmPinnedHeap(const ServerOptions& options, bool by_default) {
  const int64_t requested = options.pinned_heap_bytes;
  ASSIGN_OR_RETURN(const int64_t bytes,
                   ResolvePinnedHeapBytes(requested, options.limits.AdmittedBudget(), by_default,
                                          HostMemoryBytes()));
  if (bytes == 0) return absl::OkStatus();
  if (!HasPinnedHeap()) {
    if (requested > 0) {
      LOGF(kWarning, "--pinned_heap_bytes=%d: this attn_server has no pinned heap (a sanitizer "
           "build); request tensors are staged", requested);
    }
    return absl::OkStatus();
  }
  const std::optional<HeapArena> arena = ArmHeapArena(static_cast<size_t>(bytes));
  if (!arena.has_value()) {
    LOGF(kWarning, "the pinned heap could not reserve %d bytes (--pinned_heap_bytes); "
         "allocations stay glibc's", bytes);
    return absl::OkStatus();
  }
  LOGF(kInfo, "pinned heap: a %.0f MiB arena serves allocations of 64 KiB and more (%s)",
       arena->bytes / 1048576.0,
       requested < 0 ? "--pinned_heap_bytes=-1: the admitted-bytes budget, at most a quarter "
                       "of the host's memory"
                     : "--pinned_heap_bytes");
  return absl::OkStatus();
}

// Pages of the KV-cache pool the options ask for, or 0 with why there is
// none in `*off_reason`.
int64_t SessionPoolPages(const ServerOptions& options, std::string* off_reason) {
  if (options.kv_cache_bytes <= 0) {
    *off_reason = "KV-cache sessions are off on this server (--kv_cache_bytes=0)";
    return 0;
  }
  const int64_t pages = PoolPages(options.kv_cache_bytes, options.kv_page_bytes);
  if (pages < 1) {
    *off_reason = "KV-cache sessions are off: --kv_cache_bytes holds no page of --kv_page_bytes";
  }
  return pages;
}

absl::StatusOr<BackendSetup> CreateCpuBackend(const ServerOptions& options, std::string reason) {
  if (!options.devices.empty()) LOGF(kWarning, "--devices is ignored by the cpu backend");
  RETURN_IF_ERROR(ArmPinnedHeap(options, /*by_default=*/false));
  BackendSetup setup;
  ASSIGN_OR_RETURN(KernelCatalog catalog, KernelCatalog::ForBackend(Backend::kCpu));
  setup.catalog = std::make_shared<const KernelCatalog>(std::move(catalog));
  for (int i = 0; i < options.cpu_workers; ++i) {
    setup.executors.push_back(std::make_unique<CpuExecutor>(options.cpu_threads));
  }
  if (options.kv_cache_memory_fraction > 0) {
    LOGF(kWarning, "--kv_cache_memory_fraction is for the CUDA backend; the CPU backend's pool "
         "is --kv_cache_bytes");
  }
  if (const int64_t pages = SessionPoolPages(options, &setup.sessions_off_reason); pages > 0) {
    setup.session_memory = HostSessionMemory(pages, options.kv_page_bytes);
  }
  setup.choice_reason = std::move(reason);
  return setup;
}

absl::StatusOr<BackendSetup> CreateCudaBackend(const ServerOptions& options, std::string reason) {
  if (!BuiltWithCuda()) {
    return absl::FailedPreconditionError(
        "--backend=cuda: this attn_server was built without CUDA; use --backend=cpu");
  }
  BackendSetup setup;
  ASSIGN_OR_RETURN(setup.devices, SelectDevices(options.devices));
  // Every kernel resolved for each served device once, here: the family it
  // runs there, the device's facts and its launch attributes.
  ASSIGN_OR_RETURN(KernelCatalog catalog, KernelCatalog::ForCudaDevices(setup.devices));
  setup.catalog = std::make_shared<const KernelCatalog>(std::move(catalog));
  CudaExecutorOptions cuda;
  cuda.devices = setup.devices;
  cuda.streams_per_device = options.streams_per_device;
  cuda.max_tensor_bytes = options.limits.MaxTensorBytes();
  // LSE elements are Q's elements / head_dim, and the codec counts each
  // varlen sequence as at least one token: both fit max_tokens / head_dim.
  cuda.max_rows = options.limits.max_tokens_per_request / setup.catalog->MinHeadDim();
  cuda.catalog = setup.catalog;
  cuda.copy_threads = options.copy_threads;
  cuda.streaming_staging = options.streaming_staging;
  cuda.spin_wait = options.spin_wait;
  cuda.staging_chunk_bytes = options.staging_chunk_bytes;
  // Sessions on one device: a session's steps must run where its pages
  // are, and the scheduler gives any job to any stream.
  // With a fraction of free memory the pages are known only after the
  // streams' buffers: the tables are sized for the largest pool.
  const bool by_fraction = options.kv_cache_memory_fraction > 0;
  int64_t session_pages =
      by_fraction ? INT32_MAX : SessionPoolPages(options, &setup.sessions_off_reason);
  if (session_pages > 0 && setup.devices.size() != 1) {
    setup.sessions_off_reason = absl::StrCat(
        "KV-cache sessions serve one CUDA device in this version; this server serves ",
        setup.devices.size(), " (--devices=N picks one)");
    session_pages = 0;
  }
  if (session_pages > 0) {
    cuda.max_steps_per_call = options.max_steps_per_call;
    cuda.max_step_block_entries = StepBlockEntries(options.max_steps_per_call, session_pages);
  }
  // Before the executors, which page-lock it.
  RETURN_IF_ERROR(ArmPinnedHeap(options, /*by_default=*/true));
  ASSIGN_OR_RETURN(setup.executors, CreateCudaExecutors(cuda));
  // After the streams' buffers, which the server cannot run without.
  if (session_pages > 0) {
    ASSIGN_OR_RETURN(setup.session_memory,
                     CreateCudaSessionMemory(setup.devices.front(), options.kv_cache_bytes,
                                             options.kv_cache_memory_fraction,
                                             options.kv_page_bytes));
  }
  setup.region_backend = CreateCudaRegionBackend();
  setup.choice_reason = std::move(reason);
  return setup;
}

// Enough workers that they never bound the measurement: each only fills an
// output buffer.
constexpr int kTransportOnlyWorkers = 8;

absl::StatusOr<BackendSetup> CreateTransportOnlyBackend(const ServerOptions& options) {
  // The transport measured with the allocator the CUDA backend runs with.
  RETURN_IF_ERROR(ArmPinnedHeap(options, /*by_default=*/true));
  BackendSetup setup;
  ASSIGN_OR_RETURN(KernelCatalog catalog,
                   KernelCatalog::ForBackend(BuiltWithCuda() ? Backend::kCuda : Backend::kCpu));
  setup.catalog = std::make_shared<const KernelCatalog>(std::move(catalog));
  // The largest output; an LSE (4 bytes per row of at least one 16-bit
  // element per head_dim >= 8 elements) is always smaller.
  auto nan_bytes = std::make_shared<const std::string>(
      static_cast<size_t>(options.limits.MaxTensorBytes()), static_cast<char>(kOutputPoisonByte));
  for (int i = 0; i < kTransportOnlyWorkers; ++i) {
    setup.executors.push_back(std::make_unique<TransportOnlyExecutor>(
        i, nan_bytes, options.transport_only_fresh_outputs));
  }
  setup.backend_name = kTransportOnlyBackendName;
  setup.sessions_off_reason =
      "KV-cache sessions are off with --backend=transport_only (it computes nothing)";
  setup.choice_reason = "--backend=transport_only";
  LOGF(kWarning,
       "--backend=transport_only: MEASUREMENT MODE, no attention is computed and every output "
       "is NaN; responses say so");
  return setup;
}

}  // namespace

absl::StatusOr<BackendSetup> CreateBackend(const ServerOptions& options) {
  switch (options.backend) {
    case BackendChoice::kCpu:
      return CreateCpuBackend(options, "--backend=cpu");
    case BackendChoice::kCuda:
      return CreateCudaBackend(options, "--backend=cuda");
    case BackendChoice::kTransportOnly:
      return CreateTransportOnlyBackend(options);
    case BackendChoice::kAuto:
      break;
  }
  if (!BuiltWithCuda()) return CreateCpuBackend(options, "--backend=auto: built without CUDA");
  if (ListCudaDevices().empty()) {
    return CreateCpuBackend(options, "--backend=auto: no usable CUDA device");
  }
  return CreateCudaBackend(options, "--backend=auto: CUDA device present");
}

}  // namespace attn::server
