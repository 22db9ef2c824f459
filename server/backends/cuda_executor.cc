// The CUDA backend's executors (see cuda_executor.h). Compiled only when
// ATTN_HAVE_CUDA.
#include "backends/cuda_executor.h"

#include <cuda_runtime.h>

#include <algorithm>
#include <cstring>
#include <limits>
#include <optional>
#include <utility>
#include <vector>

#include "absl/strings/str_format.h"
#include "absl/time/clock.h"
#include "attn/validate.h"
#include "backends/cuda_routing.h"
#include "backends/cuda_slot.h"
#include "backends/heap_arena.h"
#include "backends/launch_plan.h"
#include "backends/output_poison.h"
#include "backends/parallel_copier.h"
#include "core/log.h"
#include "core/status_util.h"

namespace attn::server {
namespace {

int64_t EventNanos(cudaEvent_t from, cudaEvent_t to, int device, absl::Status* status) {
  float ms = 0.0f;
  const cudaError_t error = cudaEventElapsedTime(&ms, from, to);
  if (error != cudaSuccess && status->ok()) {
    *status = CudaStatus(error, "cudaEventElapsedTime", device, __FILE__, __LINE__);
  }
  return static_cast<int64_t>(static_cast<double>(ms) * 1e6);
}

// With --streaming_staging, launches that stage at least this many bytes in
// all are copied into pinned memory with streaming stores. On the H200
// host (bench/RESULTS.md, 2026-12-02 third run, call E), B=1, S=4096
// requests (48 MiB) served 8-34 % more with them at concurrency 8-64 over
// two rounds; S=512 (6 MiB) served 1-10 % less at most points, within the
// rounds' spread but on the side physics predicts: a 6 MiB staging buffer
// reused by each request stays in the last-level cache, where the DMA
// engine reads it, and streaming stores force it out to memory. 16 MiB
// lies between the two measured sizes.
constexpr size_t kStreamingStagingMinBytes = size_t{16} << 20;

// A session step's tables as one int32 array (cu_seqlens_q, cache_seqlens,
// the block table), or 0 bytes for any other request.
int64_t StepTableBytes(const RequestSpec& spec) {
  if (spec.cache == nullptr) return 0;
  return static_cast<int64_t>((spec.cu_seqlens_q.size() + spec.cache->cache_seqlens.size() +
                               spec.cache->block_table.size()) *
                              sizeof(int32_t));
}

// One slot (a stream of a device with its buffers) running launch plans:
// routes each (cuda_routing.h), stages, enqueues copies, poison, kernel and
// copies back, and waits.
class CudaExecutor : public Executor {
 public:
  CudaExecutor(std::unique_ptr<CudaSlot> slot, std::shared_ptr<const KernelCatalog> catalog,
               bool spin_wait)
      : slot_(std::move(slot)), catalog_(std::move(catalog)), spin_wait_(spin_wait) {}

  absl::Status BindToThread() override {
    CUDA_RETURN_IF_ERROR(cudaSetDevice(slot_->ordinal()), slot_->ordinal());
    return absl::OkStatus();
  }

  std::string Name() const override { return slot_->name(); }
  bool Healthy() const override { return healthy_; }
  int64_t BatchCapacityBytes() const override { return slot_->sizes().tensor; }
  const CudaSlot& slot() const { return *slot_; }

  std::vector<absl::Status> Run(absl::Span<Job* const> jobs) override {
    return RunPlanned(jobs, slot_->sizes().Capacity(), slot_->name(),
                      [this](const LaunchPlan& plan) { return NoteStickyError(RunPlan(plan)); });
  }

  // Runs the catalog's default kernel, bound to this device, on zeroed
  // inputs of small problems it accepts: non-causal self-attention, one
  // head, a head_dim it takes (128 if it can), 128 tokens rounded up to its
  // block size; then one query row against those keys in two splits
  // through the stream's workspace (the decode tile and the combine), when
  // it takes that. Through KernelHandle::Run, which checks what Launch
  // trusts, so the first requests pay no lazy module loading.
  absl::Status Warmup() {
    ASSIGN_OR_RETURN(const KernelHandle* bound,
                     catalog_->OnDevice(catalog_->default_kernel(), slot_->ordinal()));
    const KernelHandle& kernel = *bound;
    const KernelCapabilities& caps = kernel.info().caps;
    int64_t head_dim = 128;
    if (!caps.head_dims.empty() &&
        std::find(caps.head_dims.begin(), caps.head_dims.end(), 128) == caps.head_dims.end()) {
      head_dim = caps.head_dims.front();
    }
    const int64_t seq_multiple = std::max(1, caps.seq_multiple);
    const int64_t seq_len = seq_multiple * ((128 + seq_multiple - 1) / seq_multiple);
    const AttentionProblem problem = AttentionProblem::SelfAttention(1, seq_len, 1, head_dim);
    const DType dtype = DType::kBFloat16;
    const int64_t bytes = problem.QBytes(dtype);
    const int ordinal = slot_->ordinal();
    if (bytes > slot_->sizes().tensor) {
      LOGF(kWarning, "%s: no warm-up (problem %s exceeds --max_tokens_per_request)", Name(),
           problem.ToString());
      return absl::OkStatus();
    }
    RETURN_IF_ERROR(BindToThread());
    for (Input input : {Input::kQ, Input::kK, Input::kV}) {
      CUDA_RETURN_IF_ERROR(
          cudaMemsetAsync(slot_->device_input(input), 0, bytes, slot_->stream()), ordinal);
    }
    auto zeroed = [&](const AttentionProblem& p) {
      return AttentionArgs::Contiguous(p, dtype, slot_->device_input(Input::kQ),
                                       slot_->device_input(Input::kK),
                                       slot_->device_input(Input::kV), slot_->device_out());
    };
    AttentionProblem decode = problem;
    decode.seqlen_q = 1;
    std::vector<AttentionArgs> calls = {zeroed(problem)};
    if (ValidateProblem(decode, kernel.info()).ok() &&
        SplitKvWorkspaceBytes(decode, 2) <= slot_->sizes().workspace) {
      AttentionArgs args = zeroed(decode);
      args.workspace = slot_->device_workspace();
      args.workspace_bytes = slot_->sizes().workspace;
      args.num_splits = 2;
      calls.push_back(args);
    }
    for (const AttentionArgs& args : calls) {
      const absl::Status launched = kernel.Run(args, slot_->stream());
      CUDA_RETURN_IF_ERROR(cudaStreamSynchronize(slot_->stream()), ordinal);
      if (!launched.ok()) {
        return absl::Status(launched.code(),
                            absl::StrFormat("warm-up of kernel '%s' on %s (%s): %s",
                                            kernel.info().name, Name(), args.problem.ToString(),
                                            launched.message()));
      }
    }
    CUDA_RETURN_IF_ERROR(cudaGetLastError(), ordinal);
    return absl::OkStatus();
  }

 private:
  // What the device's events measured of one launch.
  struct DeviceTimes {
    int64_t h2d_ns = 0, kernel_ns = 0, d2h_ns = 0;
  };

  // Marks the executor unhealthy when `status` came with a sticky CUDA error.
  absl::Status NoteStickyError(absl::Status status) {
    if (!status.ok() && status.code() != absl::StatusCode::kInvalidArgument) {
      // A sticky error (illegal address, launch failure, ECC) breaks the
      // context for good: every later call returns it. Retire then.
      const cudaError_t probe = cudaStreamQuery(slot_->stream());
      if (probe != cudaSuccess && probe != cudaErrorNotReady) {
        healthy_ = false;
        LOGF(kError, "%s is unusable after: %s (now %s)", Name(), status.ToString(),
             cudaGetErrorName(probe));
      }
    }
    return status;
  }

  absl::Status RunPlan(const LaunchPlan& plan) {
    const RequestSpec& spec = plan.spec();
    if (spec.kernel == nullptr || spec.kernel_info().backend != Backend::kCuda) {
      return absl::InternalError(absl::StrFormat(
          "%s given kernel '%s' of another backend", Name(),
          spec.kernel == nullptr ? std::string("(none)") : spec.kernel_info().name));
    }
    RETURN_IF_ERROR(BindToThread());

    // Stage what goes through pinned staging so the copies below are truly
    // async; the ring and the heap's DMAs run between the start and
    // h2d_done events, so in the device's h2d time, not in stage_ns.
    const absl::Time stage_start = absl::Now();
    CudaRoute route = RoutePlan(plan, *slot_);
    if (!route.staging.empty()) slot_->copier().Copy(route.staging);
    if (spec.cache != nullptr) {
      RETURN_IF_ERROR(StageStepTables(spec));
    } else if (const int64_t cu_bytes = plan.cu_bytes(); cu_bytes > 0) {
      std::memcpy(slot_->staged_cu(0), spec.cu_seqlens_q.data(), static_cast<size_t>(cu_bytes));
      std::memcpy(slot_->staged_cu(1), spec.cu_seqlens_k.data(), static_cast<size_t>(cu_bytes));
    }
    const int64_t stage_ns = ToNanos(absl::Now() - stage_start);

    ASSIGN_OR_RETURN(const DeviceTimes measured, EnqueueAndWait(plan, route));

    const absl::Time unstage_start = absl::Now();
    for (const HostCopy& copy : route.unstage) {
      copy.to->assign(copy.from, static_cast<size_t>(copy.bytes));
    }
    for (auto& [job, lent] : route.lent) job->lent = std::move(lent);
    const int64_t unstage_ns = ToNanos(absl::Now() - unstage_start);
    plan.SetTimes(stage_ns + measured.h2d_ns, measured.kernel_ns, measured.d2h_ns + unstage_ns,
                  Name());
    return absl::OkStatus();
  }

  // Stages a session step's tables. The registry bounds them (SessionLimits,
  // sized like the slot's buffer) and placed the pool on this device, so a
  // miss is the server's bug: INTERNAL.
  absl::Status StageStepTables(const RequestSpec& spec) {
    const PagedCache& cache = *spec.cache;
    if (cache.device != slot_->ordinal()) {
      return absl::InternalError(absl::StrFormat(
          "%s given a session step whose pages are on device %d", Name(), cache.device));
    }
    if (StepTableBytes(spec) > slot_->sizes().step_tables) {
      return absl::InternalError(absl::StrFormat(
          "%s: a session step's tables need %d bytes; the stream holds %d", Name(),
          StepTableBytes(spec), slot_->sizes().step_tables));
    }
    int32_t* to = slot_->staged_step_tables();
    for (const std::vector<int32_t>* table :
         {&spec.cu_seqlens_q, &cache.cache_seqlens, &cache.block_table}) {
      to = std::copy(table->begin(), table->end(), to);
    }
    return absl::OkStatus();
  }

  // Enqueues the route's copies in, poison, kernel and copies back
  // (Enqueue) and waits for them. Whatever was enqueued finishes before
  // this returns, even when a later step failed to enqueue, so the buffers
  // may be reused.
  absl::StatusOr<DeviceTimes> EnqueueAndWait(const LaunchPlan& plan, const CudaRoute& route) {
    const int ordinal = slot_->ordinal();
    absl::Status status = Enqueue(plan, route);
    const cudaError_t synced = WaitFor(slot_->d2h_done());
    if (!status.ok()) {
      cudaStreamSynchronize(slot_->stream());
      return status;
    }
    RETURN_IF_ERROR(CudaStatus(
        synced, spin_wait_ ? "cudaEventQuery(d2h_done)" : "cudaEventSynchronize(d2h_done)",
        ordinal, __FILE__, __LINE__));
    DeviceTimes times;
    times.h2d_ns = EventNanos(slot_->start(), slot_->h2d_done(), ordinal, &status);
    times.kernel_ns = EventNanos(slot_->h2d_done(), slot_->kernel_done(), ordinal, &status);
    times.d2h_ns = EventNanos(slot_->kernel_done(), slot_->d2h_done(), ordinal, &status);
    RETURN_IF_ERROR(status);
    return times;
  }

  // Waits for `event` (ServerOptions::spin_wait: polling, or the event's
  // blocking-sync sleep).
  cudaError_t WaitFor(cudaEvent_t event) const {
    if (!spin_wait_) return cudaEventSynchronize(event);
    cudaError_t state;
    while ((state = cudaEventQuery(event)) == cudaErrorNotReady) {
    }
    return state;
  }

  absl::Status EnqueueCopies(const std::vector<DeviceCopy>& copies) {
    for (const DeviceCopy& c : copies) {
      CUDA_RETURN_IF_ERROR(cudaMemcpyAsync(c.to, c.from, static_cast<size_t>(c.bytes), c.kind,
                                           slot_->stream()),
                           slot_->ordinal());
    }
    return absl::OkStatus();
  }

  absl::Status Enqueue(const LaunchPlan& plan, const CudaRoute& route) {
    const RequestSpec& spec = plan.spec();
    const int ordinal = slot_->ordinal();
    cudaStream_t stream = slot_->stream();
    CUDA_RETURN_IF_ERROR(cudaEventRecord(slot_->start(), stream), ordinal);
    if (!route.ring.empty()) RETURN_IF_ERROR(slot_->ring()->Enqueue(route.ring, stream));
    if (route.from_heap) RETURN_IF_ERROR(slot_->heap_copies().Enqueue(stream));  // h2d_batch.h
    RETURN_IF_ERROR(EnqueueCopies(route.in));
    const int64_t cu_bytes = spec.cache != nullptr ? 0 : plan.cu_bytes();
    if (const int64_t bytes = StepTableBytes(spec); bytes > 0) {
      CUDA_RETURN_IF_ERROR(cudaMemcpyAsync(slot_->device_step_tables(), slot_->staged_step_tables(),
                                           static_cast<size_t>(bytes), cudaMemcpyHostToDevice,
                                           stream),
                           ordinal);
    }
    for (int which = 0; which < 2 && cu_bytes > 0; ++which) {
      CUDA_RETURN_IF_ERROR(cudaMemcpyAsync(slot_->device_cu(which), slot_->staged_cu(which),
                                           static_cast<size_t>(cu_bytes), cudaMemcpyHostToDevice,
                                           stream),
                           ordinal);
    }
    // Poisoned where the kernel writes (the slot's buffers or a CUDA
    // region), so rows it fails to write read as NaN, never as stale data.
    CUDA_RETURN_IF_ERROR(cudaMemsetAsync(route.out, kOutputPoisonByte, plan.q_bytes(), stream),
                         ordinal);
    if (route.lse != nullptr) {
      CUDA_RETURN_IF_ERROR(
          cudaMemsetAsync(route.lse, kOutputPoisonByte, plan.lse_bytes(), stream), ordinal);
    }
    CUDA_RETURN_IF_ERROR(cudaEventRecord(slot_->h2d_done(), stream), ordinal);

    AttentionArgs args = AttentionArgs::Contiguous(spec.problem, spec.dtype, route.q, route.k,
                                                   route.v, route.out, route.lse);
    if (spec.cache != nullptr) {
      // k and v are the new tokens, appended into the pool's pages.
      const int32_t* cu_q = slot_->device_step_tables();
      const int32_t* cache_seqlens = cu_q + spec.cu_seqlens_q.size();
      const int32_t* block_table = cache_seqlens + spec.cache->cache_seqlens.size();
      args = spec.StepArgs(spec.cache->pool, route.q, route.k, route.v, route.out, route.lse, cu_q,
                           cache_seqlens, block_table);
    } else if (spec.problem.varlen) {
      args.cu_seqlens_q = slot_->device_cu(0);
      args.cu_seqlens_k = slot_->device_cu(1);
    }
    // The stream's own workspace: launches on it run one after another, and
    // it holds what any kernel of the catalog chooses (CudaBufferSizes).
    args.workspace = slot_->device_workspace();
    args.workspace_bytes = slot_->sizes().workspace;
    // Admission validated the problem for this kernel (and a stacked plan
    // its stacked problem); the executor made the pointers (its buffers, or
    // regions at 16-byte offsets) and contiguous strides: nothing is left
    // for Run to check.
    ASSIGN_OR_RETURN(const KernelHandle* bound, catalog_->OnDevice(*spec.kernel, ordinal));
    RETURN_IF_ERROR(bound->Launch(args, stream));
    CUDA_RETURN_IF_ERROR(cudaEventRecord(slot_->kernel_done(), stream), ordinal);
    RETURN_IF_ERROR(EnqueueCopies(route.back));
    CUDA_RETURN_IF_ERROR(cudaEventRecord(slot_->d2h_done(), stream), ordinal);
    return absl::OkStatus();
  }

  const std::unique_ptr<CudaSlot> slot_;
  const std::shared_ptr<const KernelCatalog> catalog_;  // never null
  const bool spin_wait_;
  bool healthy_ = true;  // read and written on the worker thread only
};

// The pinned heap's arena when it was armed (backend.cc, before the
// executors are made), page-locked for every device (once per process: the
// executors of a later call share it); nullopt without it. A failed
// registration is logged and the server stages as without the heap.
const std::optional<HeapArena>& RegisterPinnedHeap() {
  static const std::optional<HeapArena> registered = [] {
    std::optional<HeapArena> arena = FindHeapArena();
    if (arena.has_value()) {
      const absl::Time start = absl::Now();
      const cudaError_t error =
          cudaHostRegister(arena->base, arena->bytes, cudaHostRegisterPortable);
      if (error != cudaSuccess) {
        cudaGetLastError();  // not sticky: clear it
        LOGF(kWarning,
             "the pinned heap's %.0f MiB arena could not be page-locked (cudaHostRegister: %s); "
             "request tensors are staged as without it (--pinned_heap_bytes)",
             arena->bytes / 1048576.0, cudaGetErrorString(error));
        arena.reset();
      } else {
        LOGF(kInfo,
             "pinned heap: %.0f MiB arena page-locked in %.2f s; request tensors gRPC reads into "
             "it go to the GPU without staging",
             arena->bytes / 1048576.0, absl::ToDoubleSeconds(absl::Now() - start));
      }
    }
    return arena;
  }();
  return registered;
}

}  // namespace

absl::StatusOr<std::vector<std::unique_ptr<Executor>>> CreateCudaExecutors(
    const CudaExecutorOptions& options) {
  if (options.catalog == nullptr) {
    return absl::InternalError("CreateCudaExecutors: no kernel catalog");
  }
  std::vector<std::unique_ptr<Executor>> executors;
  const std::optional<HeapArena>& heap = RegisterPinnedHeap();
  auto copier = std::make_shared<ParallelCopier>(
      options.copy_threads,
      options.streaming_staging ? kStreamingStagingMinBytes : std::numeric_limits<size_t>::max());
  for (const DeviceInfo& device : options.devices) {
    const CudaBufferSizes sizes =
        CudaBufferSizes::For(options.max_tensor_bytes, options.max_rows,
                             options.catalog->MaxWorkspaceBytes(device.ordinal))
            .WithStepTables(options.max_steps_per_call, options.max_step_block_entries);
    RETURN_IF_ERROR(CheckDeviceMemory(device, options.streams_per_device, sizes));
    for (int s = 0; s < options.streams_per_device; ++s) {
      ASSIGN_OR_RETURN(std::unique_ptr<CudaSlot> slot,
                       CudaSlot::Create(device, s, sizes, copier, options.staging_chunk_bytes,
                                        heap));
      auto executor = std::make_unique<CudaExecutor>(std::move(slot), options.catalog,
                                                     options.spin_wait);
      RETURN_IF_ERROR(executor->Warmup());
      LOGF(kInfo,
           "%s ready: 4 x %.0f MiB tensor buffers + %.1f MiB LSE and offsets + %.1f MiB "
           "kernel workspace on the device, %.0f MiB pinned staging + %.0f MiB pinned memory "
           "lent to responses; %s",
           executor->Name(), sizes.tensor / 1048576.0,
           (sizes.lse + 2 * sizes.cu + sizes.step_tables) / 1048576.0,
           sizes.workspace / 1048576.0,
           (sizes.PinnedIn() + sizes.PinnedOut()) / 1048576.0,
           CudaSlot::kLentOutputs * sizes.PinnedOut() / 1048576.0,
           executor->slot().StagingDescription());
      executors.push_back(std::move(executor));
    }
  }
  return executors;
}

std::string CudaVersionString() {
  int runtime = 0, driver = 0;
  cudaRuntimeGetVersion(&runtime);
  cudaDriverGetVersion(&driver);
  return absl::StrFormat("CUDA runtime %d.%d, driver %d.%d", runtime / 1000, (runtime % 1000) / 10,
                         driver / 1000, (driver % 1000) / 10);
}

}  // namespace attn::server
