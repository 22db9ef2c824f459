// The CUDA backend's executors (see cuda_executor.h). Compiled only when
// ATTN_HAVE_CUDA.
#include "backends/cuda_executor.h"

#include <cuda_runtime.h>

#include <algorithm>
#include <atomic>
#include <cstring>
#include <limits>
#include <optional>
#include <utility>
#include <vector>

#include "absl/strings/str_format.h"
#include "absl/time/clock.h"
#include "backends/chunked_upload.h"
#include "backends/cuda_memory.h"
#include "backends/h2d_batch.h"
#include "backends/heap_arena.h"
#include "backends/output_poison.h"
#include "backends/parallel_copier.h"
#include "backends/pinned_output_pool.h"
#include "attn/validate.h"
#include "scheduling/batch_key.h"
#include "observability/log.h"
#include "status_util.h"

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

// Bytes of every buffer one executor holds, from the request bounds.
struct BufferSizes {
  int64_t tensor = 0;  // each of Q, K, V, O
  int64_t lse = 0;     // float32 rows
  int64_t cu = 0;      // each of cu_seqlens_q and cu_seqlens_k (int32)

  static BufferSizes For(int64_t max_tensor_bytes, int64_t max_rows) {
    BufferSizes b;
    b.tensor = max_tensor_bytes;
    b.lse = max_rows * static_cast<int64_t>(sizeof(float));
    b.cu = (max_rows + 1) * static_cast<int64_t>(sizeof(int32_t));
    return b;
  }
  int64_t Device() const { return 4 * tensor + lse + 2 * cu; }
  int64_t PinnedIn() const { return 3 * tensor + 2 * cu; }  // q, k, v, cu_q, cu_k
  int64_t PinnedOut() const { return tensor + lse; }        // o, lse
};

// Pinned memory per executor that responses are sent from (see
// pinned_output_pool.h), in outputs of the largest size: room for the
// responses of the requests a stream finishes while earlier ones are still
// being sent (24 at S=4096, B=1, H=16, d=128 with the default limits). With
// 3 (12 such outputs), at concurrency 64 on the H200 host about half the
// responses found the pool full and were copied once more on the worker
// (d2h 2.4 ms a request against 0.4 at concurrency 32; bench/RESULTS.md,
// 2026-12-02 second run). 6 x 64 MiB is 384 MiB pinned per stream.
constexpr int kLentOutputBuffers = 6;

// With --streaming_staging, requests that stage at least this many bytes in
// all are copied into pinned memory with streaming stores. On the H200
// host (bench/RESULTS.md, 2026-12-02 third run, call E), B=1, S=4096
// requests (48 MiB) served 8-34 % more with them at concurrency 8-64 over
// two rounds; S=512 (6 MiB) served 1-10 % less at most points, within the
// rounds' spread but on the side physics predicts: a 6 MiB staging buffer
// reused by each request stays in the last-level cache, where the DMA
// engine reads it, and streaming stores force it out to memory. 16 MiB
// lies between the two measured sizes.
constexpr size_t kStreamingStagingMinBytes = size_t{16} << 20;

// With --staging_chunk_bytes, slots in each executor's ring
// (chunked_upload.h). A slot is written again only after its DMA finished;
// the DMA of a chunk (40+ GB/s) is several times quicker than its copy, so
// with four slots the copies seldom wait for one.
constexpr int kStagingSlots = 4;

// One stream of one device with everything a request needs, allocated once.
class CudaExecutor : public Executor {
 public:
  static absl::StatusOr<std::unique_ptr<CudaExecutor>> Create(
      const DeviceInfo& device, int stream_index, const BufferSizes& sizes,
      std::shared_ptr<ParallelCopier> copier, int64_t staging_chunk_bytes,
      std::optional<HeapArena> dma_heap) {
    const int ordinal = device.ordinal;
    CUDA_RETURN_IF_ERROR(cudaSetDevice(ordinal), ordinal);
    std::unique_ptr<CudaExecutor> e(
        new CudaExecutor(device, stream_index, sizes, std::move(copier)));
    e->dma_heap_ = dma_heap;
    ASSIGN_OR_RETURN(e->stream_, CreateStream(ordinal));
    ASSIGN_OR_RETURN(e->start_, CreateEvent(ordinal, false));
    ASSIGN_OR_RETURN(e->h2d_done_, CreateEvent(ordinal, false));
    ASSIGN_OR_RETURN(e->kernel_done_, CreateEvent(ordinal, false));
    ASSIGN_OR_RETURN(e->d2h_done_, CreateEvent(ordinal, /*blocking_sync=*/true));
    for (DeviceBuffer* buffer : {&e->d_q_, &e->d_k_, &e->d_v_, &e->d_out_}) {
      ASSIGN_OR_RETURN(*buffer, AllocateDevice(static_cast<size_t>(sizes.tensor), ordinal));
    }
    ASSIGN_OR_RETURN(e->d_lse_, AllocateDevice(static_cast<size_t>(sizes.lse), ordinal));
    for (DeviceBuffer* buffer : {&e->d_cu_q_, &e->d_cu_k_}) {
      ASSIGN_OR_RETURN(*buffer, AllocateDevice(static_cast<size_t>(sizes.cu), ordinal));
    }
    ASSIGN_OR_RETURN(e->h_in_, AllocatePinned(static_cast<size_t>(sizes.PinnedIn()), ordinal));
    // The ring is the front of the input staging, which only RunStacked
    // (batches, staged whole) also uses, on the same worker, after every DMA
    // of the request before has finished. Slots are whole multiples of 256
    // bytes within Q, K and V's staging.
    const size_t slot_bytes =
        std::min<size_t>(static_cast<size_t>(staging_chunk_bytes),
                         static_cast<size_t>(3 * sizes.tensor) / kStagingSlots) &
        ~size_t{255};
    if (slot_bytes > 0) {
      ASSIGN_OR_RETURN(e->chunked_,
                       ChunkedUpload::Create(static_cast<char*>(e->h_in_.get()), slot_bytes,
                                             kStagingSlots, ordinal, e->copier_.get()));
    }
    ASSIGN_OR_RETURN(e->h_out_, AllocatePinned(static_cast<size_t>(sizes.PinnedOut()), ordinal));
    ASSIGN_OR_RETURN(e->lent_out_,
                     PinnedOutputPool::Create(
                         kLentOutputBuffers * static_cast<size_t>(sizes.PinnedOut()), ordinal));
    return e;
  }

  ~CudaExecutor() override {
    // Resources are released with their device current; nothing may still
    // be running on the stream.
    if (cudaSetDevice(ordinal_) == cudaSuccess && stream_.get() != nullptr) {
      cudaStreamSynchronize(stream_.get());
    }
  }

  absl::Status BindToThread() override {
    CUDA_RETURN_IF_ERROR(cudaSetDevice(ordinal_), ordinal_);
    return absl::OkStatus();
  }

  std::string Name() const override { return name_; }
  bool Healthy() const override { return healthy_; }

  // Runs `kernel` once on zeroed inputs of a small problem it accepts:
  // non-causal self-attention, one head, a head_dim it takes (128 if it
  // can), 128 tokens rounded up to its block size.
  absl::Status Warmup(const KernelHandle& kernel) {
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
    if (bytes > sizes_.tensor) {
      LOGF(kWarning, "%s: no warm-up (problem %s exceeds --max_tokens_per_request)", name_,
           problem.ToString());
      return absl::OkStatus();
    }
    RETURN_IF_ERROR(BindToThread());
    for (const DeviceBuffer* buffer : {&d_q_, &d_k_, &d_v_}) {
      CUDA_RETURN_IF_ERROR(cudaMemsetAsync(buffer->get(), 0, bytes, stream_.get()), ordinal_);
    }
    const absl::Status launched =
        kernel.Run(AttentionArgs::Contiguous(problem, dtype, d_q_.get(), d_k_.get(), d_v_.get(),
                                             d_out_.get()),
                   stream_.get());
    CUDA_RETURN_IF_ERROR(cudaStreamSynchronize(stream_.get()), ordinal_);
    if (!launched.ok()) {
      return absl::Status(launched.code(),
                          absl::StrFormat("warm-up of kernel '%s' on %s: %s", kernel.info().name,
                                          name_, launched.message()));
    }
    CUDA_RETURN_IF_ERROR(cudaGetLastError(), ordinal_);
    return absl::OkStatus();
  }

  absl::Status Run(Job& job) override { return NoteStickyError(RunOnStream(job)); }

  // Stacks the jobs into this executor's staging and buffers and runs them
  // as one launch; jobs that do not fit together (buffers, the kernel's
  // limits on the stacked problem) run one by one instead.
  std::vector<absl::Status> RunBatch(absl::Span<Job* const> jobs) override {
    absl::StatusOr<AttentionProblem> stacked = StackableHere(jobs);
    if (!stacked.ok()) {
      LOGF(kWarning, "%s runs a batch of %d one by one: %s", name_, jobs.size(),
           stacked.status().message());
      return Executor::RunBatch(jobs);
    }
    return std::vector<absl::Status>(jobs.size(),
                                     NoteStickyError(RunStacked(jobs, *stacked)));
  }

  int64_t BatchCapacityBytes() const override { return sizes_.tensor; }

  // How inline inputs reach the device, for the start-up log.
  std::string StagingDescription() const {
    std::string how = chunked_ == nullptr
                          ? std::string("inputs staged whole")
                          : absl::StrFormat("inputs staged through a ring of %d x %.2f MiB",
                                            chunked_->slots(), chunked_->slot_bytes() / 1048576.0);
    if (dma_heap_.has_value()) how += " unless gRPC received them into the pinned heap";
    return how;
  }

 private:
  // Marks the executor unhealthy when `status` came with a sticky CUDA error.
  absl::Status NoteStickyError(absl::Status status) {
    if (!status.ok() && status.code() != absl::StatusCode::kInvalidArgument) {
      // A sticky error (illegal address, launch failure, ECC) breaks the
      // context for good: every later call returns it. Retire then.
      const cudaError_t probe = cudaStreamQuery(stream_.get());
      if (probe != cudaSuccess && probe != cudaErrorNotReady) {
        healthy_ = false;
        LOGF(kError, "%s is unusable after: %s (now %s)", name_, status.ToString(),
             cudaGetErrorName(probe));
      }
    }
    return status;
  }

  // The stacked problem of `jobs` when they may run as one launch here:
  // stackable with one batch key, a CUDA kernel, within the buffers and the
  // kernel's own limits (ValidateProblem, e.g. batch at most 65535).
  absl::StatusOr<AttentionProblem> StackableHere(absl::Span<Job* const> jobs) const {
    const RequestSpec& key = jobs.front()->spec;
    for (const Job* job : jobs) {
      if (!Stackable(*job) || !SameBatchKey(key, job->spec)) {
        return absl::InternalError("given jobs that cannot be stacked");
      }
    }
    if (key.kernel_info().backend != Backend::kCuda) {
      return absl::InternalError("given a kernel of another backend");
    }
    const AttentionProblem problem = StackedProblem(jobs);
    if (problem.QBytes(key.dtype) > sizes_.tensor || problem.KVBytes(key.dtype) > sizes_.tensor ||
        problem.LseBytes() > sizes_.lse) {
      return absl::ResourceExhaustedError(absl::StrFormat(
          "stacked problem %s exceeds the buffers (--max_tokens_per_request)", problem.ToString()));
    }
    RETURN_IF_ERROR(ValidateProblem(problem, key.kernel_info()));
    return problem;
  }

  // One launch over `jobs` stacked along batch as `problem`: each job's Q,
  // K, V staged at its batch offset, one copy per tensor each way, the
  // stacked O (and LSE) split back into each job's strings. Every job gets
  // the whole launch's times.
  absl::Status RunStacked(absl::Span<Job* const> jobs, const AttentionProblem& problem) {
    RETURN_IF_ERROR(BindToThread());
    RequestSpec spec = jobs.front()->spec;
    spec.problem = problem;
    Transfer t;
    t.q = spec.QBytes();
    t.kv = spec.KVBytes();
    t.lse = spec.LseBytes();

    const absl::Time stage_start = absl::Now();
    char* staged = static_cast<char*>(h_in_.get());
    std::vector<ParallelCopier::Task> staging;
    int64_t q_at = 0, kv_at = 0;
    for (const Job* job : jobs) {
      staging.push_back({&job->q, staged + q_at});
      staging.push_back({&job->k, staged + sizes_.tensor + kv_at});
      staging.push_back({&job->v, staged + 2 * sizes_.tensor + kv_at});
      q_at += job->spec.QBytes();
      kv_at += job->spec.KVBytes();
    }
    copier_->Copy(staging);
    const int64_t stage_ns = ToNanos(absl::Now() - stage_start);

    char* out_host = static_cast<char*>(h_out_.get());
    Placement p;
    p.q = d_q_.get();
    p.k = d_k_.get();
    p.v = d_v_.get();
    p.out = d_out_.get();
    p.q_from = staged;
    p.k_from = staged + sizes_.tensor;
    p.v_from = staged + 2 * sizes_.tensor;
    p.out_to = out_host;
    if (problem.return_lse) {
      p.lse = static_cast<float*>(d_lse_.get());
      p.lse_to = out_host + sizes_.tensor;
    }

    ASSIGN_OR_RETURN(const DeviceTimes measured, EnqueueAndWait(spec, t, p));

    // Each job's O (and LSE) is its consecutive slice (batch_key.h).
    const absl::Time unstage_start = absl::Now();
    q_at = 0;
    int64_t lse_at = 0;
    for (Job* job : jobs) {
      job->out->assign(out_host + q_at, static_cast<size_t>(job->spec.QBytes()));
      if (problem.return_lse) {
        job->lse->assign(out_host + sizes_.tensor + lse_at,
                         static_cast<size_t>(job->spec.LseBytes()));
      }
      q_at += job->spec.QBytes();
      lse_at += job->spec.LseBytes();
    }
    const int64_t unstage_ns = ToNanos(absl::Now() - unstage_start);
    for (Job* job : jobs) {
      job->device = name_;
      job->times.h2d_ns = stage_ns + measured.h2d_ns;
      job->times.kernel_ns = measured.kernel_ns;
      job->times.d2h_ns = measured.d2h_ns + unstage_ns;
      job->times.batch_size = static_cast<int64_t>(jobs.size());
    }
    return absl::OkStatus();
  }

  // What one request moves, in bytes.
  struct Transfer {
    int64_t q = 0, kv = 0, lse = 0, cu = 0;
  };

  absl::Status RunOnStream(Job& job) {
    const RequestSpec& spec = job.spec;
    if (spec.kernel == nullptr || spec.kernel_info().backend != Backend::kCuda) {
      return absl::InternalError(absl::StrFormat(
          "%s given kernel '%s' of another backend", name_,
          spec.kernel == nullptr ? std::string("(none)") : spec.kernel_info().name));
    }
    Transfer t;
    t.q = spec.QBytes();
    t.kv = spec.KVBytes();
    t.lse = spec.LseBytes();
    t.cu = spec.problem.varlen
               ? static_cast<int64_t>(spec.cu_seqlens_q.size() * sizeof(int32_t))
               : 0;
    // The front end's token limit makes these unreachable.
    const struct {
      const char* what;
      int64_t needed, capacity;
    } fits[] = {{"q", t.q, sizes_.tensor},
                {"k and v", t.kv, sizes_.tensor},
                {"lse", t.lse, sizes_.lse},
                {"cu_seqlens", t.cu, sizes_.cu}};
    for (const auto& f : fits) {
      if (f.needed > f.capacity) {
        return absl::ResourceExhaustedError(absl::StrFormat(
            "request needs %d bytes for %s; %s has buffers of %d (--max_tokens_per_request)",
            f.needed, f.what, name_, f.capacity));
      }
    }
    RETURN_IF_ERROR(BindToThread());
    job.device = name_;

    // Stage the inline tensors Q, K, V (and the offsets) into pinned memory
    // so the copies below are truly async: whole, here, or a chunk at a
    // time through the ring in Enqueue (chunked_upload.h); or not at all
    // when gRPC received them into the pinned heap's arena. Tensors in
    // system regions are page-locked already and copied from there; those
    // in CUDA regions are read by the kernel in place.
    const absl::Time stage_start = absl::Now();
    char* staged = static_cast<char*>(h_in_.get());
    std::vector<ParallelCopier::Task> staging;
    const TensorBytes* inputs[3] = {&job.q, &job.k, &job.v};
    // Each inline input's route, decided once (for a heap, a walk over its
    // pieces); Place follows it. The copies from the heap are listed here,
    // in the same walk that stages its pieces outside the arena.
    Route routes[3] = {};
    heap_copies_.Clear();
    for (int i = 0; i < 3; ++i) {
      if (inputs[i]->path() != TensorPath::kInline) continue;
      routes[i] = Staging(*inputs[i]);
      char* const to = staged + i * sizes_.tensor;
      switch (routes[i]) {
        case Route::kStagedWhole:
          staging.push_back({inputs[i], to});
          break;
        case Route::kThroughRing:
          break;
        case Route::kFromHeap:
          ListHeapCopies(*inputs[i], to, static_cast<char*>(DeviceInput(i)), &staging);
          break;
      }
      if (routes[i] != Route::kFromHeap && dma_heap_.has_value()) WarnOnceOfHeapMiss(*inputs[i]);
    }
    if (!staging.empty()) copier_->Copy(staging);
    if (t.cu > 0) {
      std::memcpy(StagedCu(0), spec.cu_seqlens_q.data(), t.cu);
      std::memcpy(StagedCu(1), spec.cu_seqlens_k.data(), t.cu);
    }
    const int64_t stage_ns = ToNanos(absl::Now() - stage_start);

    // O (and the LSE) go to the request's regions when it named them, else
    // to pinned memory the response is sent from when there is room, else
    // to this executor's own staging, copied out below.
    const bool outputs_inline = !job.out_place.in_region() && !job.lse_place.in_region();
    std::unique_ptr<PinnedOutputPool::Lent> lent =
        job.takes_output_buffer && outputs_inline
            ? lent_out_->Take(static_cast<size_t>(t.q),
                              spec.problem.return_lse ? static_cast<size_t>(t.lse) : 0)
            : nullptr;
    char* out_host = lent != nullptr ? lent->data() : static_cast<char*>(h_out_.get());
    char* lse_host = lent != nullptr ? lent->lse_data() : out_host + sizes_.tensor;
    Placement place = Place(job, routes, out_host, lse_host);

    ASSIGN_OR_RETURN(const DeviceTimes measured, EnqueueAndWait(spec, t, place));

    const absl::Time unstage_start = absl::Now();
    if (lent != nullptr) {
      job.output = std::move(lent);
    } else {
      if (!job.out_place.in_region()) job.out->assign(out_host, static_cast<size_t>(t.q));
      if (job.lse != nullptr && !job.lse_place.in_region()) {
        job.lse->assign(out_host + sizes_.tensor, static_cast<size_t>(t.lse));
      }
    }
    const int64_t unstage_ns = ToNanos(absl::Now() - unstage_start);

    // Chunked staging and copies from the heap run between the start and
    // h2d_done events: in measured.h2d_ns, not in stage_ns.
    job.times.h2d_ns = stage_ns + measured.h2d_ns;
    job.times.kernel_ns = measured.kernel_ns;
    job.times.d2h_ns = measured.d2h_ns + unstage_ns;
    return absl::OkStatus();
  }

  // Where one request's tensors are for the kernel, and the copies that
  // bring them there and back.
  struct Placement {
    // What the kernel reads and writes (device memory).
    const void* q = nullptr;
    const void* k = nullptr;
    const void* v = nullptr;
    void* out = nullptr;
    float* lse = nullptr;  // null unless the problem returns it
    // Host sources of the H2D copies (null: no copy, the kernel reads a
    // CUDA region in place) and destinations of the D2H copies (null: the
    // kernel wrote a CUDA region in place).
    const char* q_from = nullptr;
    const char* k_from = nullptr;
    const char* v_from = nullptr;
    char* out_to = nullptr;
    char* lse_to = nullptr;
    // Inline inputs copied through the ring, and whether some are copied
    // piece by piece from the pinned heap's arena, by heap_copies_ (their
    // *_from is null).
    std::vector<ChunkedUpload::Tensor> chunked;
    bool from_heap = false;
  };

  // The device buffer of input `i` (0: q, 1: k, 2: v).
  void* DeviceInput(int i) const {
    const DeviceBuffer* buffers[3] = {&d_q_, &d_k_, &d_v_};
    return buffers[i]->get();
  }

  // Lists in heap_copies_ the copies that bring `tensor`, mostly in the
  // arena, to `device`: one per piece in the arena (gRPC 1.51 reads sockets
  // into separate 64 KiB slices, and each block of the arena has its header
  // in front, so no two pieces are ever adjacent: about 770 copies for 48
  // MiB), and one per run of consecutive pieces outside it (a short read's
  // small slice, one that found the arena full), which go through `staged`
  // at their offsets: their staging copies are added to `staging`.
  void ListHeapCopies(const TensorBytes& tensor, char* staged, char* device,
                      std::vector<ParallelCopier::Task>* staging) {
    size_t offset = 0;
    size_t staged_from = 0, staged_bytes = 0;  // the run of staged pieces so far
    for (absl::string_view piece : tensor.pieces()) {
      if (dma_heap_->Contains(piece)) {
        heap_copies_.Add(device + staged_from, staged + staged_from, staged_bytes);
        staged_bytes = 0;
        heap_copies_.Add(device + offset, piece.data(), piece.size());
      } else {
        staging->push_back({&tensor, staged + offset, static_cast<int64_t>(offset),
                            static_cast<int64_t>(piece.size())});
        if (staged_bytes == 0) staged_from = offset;
        staged_bytes += piece.size();
      }
      offset += piece.size();
    }
    heap_copies_.Add(device + staged_from, staged + staged_from, staged_bytes);
  }

  // With the pinned heap loaded, a tensor that was staged anyway: logged
  // once per process, with what tells the two causes apart (pieces below
  // the shim's threshold, or an arena too full for the requests in flight).
  void WarnOnceOfHeapMiss(const TensorBytes& tensor) const {
    static std::atomic<bool> warned{false};
    if (warned.exchange(true)) return;
    int outside = 0;
    size_t smallest = std::numeric_limits<size_t>::max();
    for (absl::string_view piece : tensor.pieces()) {
      if (!dma_heap_->Contains(piece)) {
        ++outside;
        smallest = std::min(smallest, piece.size());
      }
    }
    LOGF(kWarning,
         "%s: %d of the %d pieces of a %d-byte tensor lay outside the pinned heap's arena (the "
         "smallest %d bytes), more than half its bytes, so it was staged whole: an arena "
         "(--pinned_heap_bytes) too small for the requests in flight, or pieces below its 64 KiB "
         "threshold. Logged once.",
         name_, outside, tensor.pieces().size(), tensor.size(), smallest);
  }

  // How an inline input reaches the device (only inline ones: a region's
  // tensor is never staged). From the heap when the arena holds at least
  // half its bytes (the rest staged piece by piece); a tensor mostly
  // outside (a full arena) is staged whole, by the copy threads in a few
  // large chunks rather than piece by piece.
  enum class Route { kStagedWhole, kThroughRing, kFromHeap };
  Route Staging(const TensorBytes& tensor) const {
    if (dma_heap_.has_value() && 2 * dma_heap_->BytesInside(tensor) >= tensor.size()) {
      return Route::kFromHeap;
    }
    return chunked_ != nullptr ? Route::kThroughRing : Route::kStagedWhole;
  }

  // Inline inputs come from staging, through the ring or from the heap, as
  // `routes` (RunOnStream's Staging) says; system-region ones from the
  // region; all go to this executor's device buffers. CUDA-region tensors
  // are used where they are. Outputs: into the device buffers and then to a
  // system region or `out_host`; or straight into a CUDA region.
  Placement Place(const Job& job, const Route (&routes)[3], char* out_host,
                  char* lse_host) const {
    const char* staged = static_cast<const char*>(h_in_.get());
    Placement p;
    const TensorBytes* inputs[3] = {&job.q, &job.k, &job.v};
    const void** read_at[3] = {&p.q, &p.k, &p.v};
    const char** from[3] = {&p.q_from, &p.k_from, &p.v_from};
    for (int i = 0; i < 3; ++i) {
      void* const buffer = DeviceInput(i);
      switch (inputs[i]->path()) {
        case TensorPath::kInline:
          *read_at[i] = buffer;
          switch (routes[i]) {
            case Route::kStagedWhole:
              *from[i] = staged + i * sizes_.tensor;
              break;
            case Route::kThroughRing:
              p.chunked.push_back({inputs[i], buffer});
              break;
            case Route::kFromHeap:
              p.from_heap = true;  // listed in heap_copies_ by RunOnStream
              break;
          }
          break;
        case TensorPath::kSystemRegion:
          *read_at[i] = buffer;
          *from[i] = inputs[i]->data();
          break;
        case TensorPath::kCudaRegion:
          *read_at[i] = inputs[i]->data();
          break;
      }
    }
    auto place_output = [](const OutputPlace& place, void* buffer, char* host, void** device,
                           char** to) {
      switch (place.path) {
        case TensorPath::kInline:
          *device = buffer;
          *to = host;
          break;
        case TensorPath::kSystemRegion:
          *device = buffer;
          *to = place.data;
          break;
        case TensorPath::kCudaRegion:
          *device = place.data;
          break;
      }
    };
    place_output(job.out_place, d_out_.get(), out_host, &p.out, &p.out_to);
    if (job.spec.problem.return_lse) {
      void* lse = nullptr;
      place_output(job.lse_place, d_lse_.get(), lse_host, &lse, &p.lse_to);
      p.lse = static_cast<float*>(lse);
    }
    return p;
  }

  CudaExecutor(const DeviceInfo& device, int stream_index, const BufferSizes& sizes,
               std::shared_ptr<ParallelCopier> copier)
      : ordinal_(device.ordinal),
        name_(
            absl::StrFormat("%s (cuda:%d, stream %d)", device.name, device.ordinal, stream_index)),
        sizes_(sizes),
        copier_(std::move(copier)),
        heap_copies_(device.ordinal) {}

  // Pinned input layout: q, k, v at multiples of sizes_.tensor, then the
  // two cu_seqlens; output layout: o, then the LSE at sizes_.tensor.
  char* StagedCu(int which) const {
    return static_cast<char*>(h_in_.get()) + 3 * sizes_.tensor + which * sizes_.cu;
  }

  // What the device's events measured of one run.
  struct DeviceTimes {
    int64_t h2d_ns = 0, kernel_ns = 0, d2h_ns = 0;
  };

  // Enqueues copy-in, poison, kernel and copy-out (Enqueue) and waits for
  // them. Whatever was enqueued finishes before this returns, even when a
  // later step failed to enqueue, so the buffers may be reused.
  absl::StatusOr<DeviceTimes> EnqueueAndWait(const RequestSpec& spec, const Transfer& t,
                                             const Placement& p) {
    absl::Status status = Enqueue(spec, t, p);
    const cudaError_t synced = cudaEventSynchronize(d2h_done_.get());
    if (!status.ok()) {
      cudaStreamSynchronize(stream_.get());
      return status;
    }
    RETURN_IF_ERROR(
        CudaStatus(synced, "cudaEventSynchronize(d2h_done)", ordinal_, __FILE__, __LINE__));
    DeviceTimes times;
    times.h2d_ns = EventNanos(start_.get(), h2d_done_.get(), ordinal_, &status);
    times.kernel_ns = EventNanos(h2d_done_.get(), kernel_done_.get(), ordinal_, &status);
    times.d2h_ns = EventNanos(kernel_done_.get(), d2h_done_.get(), ordinal_, &status);
    RETURN_IF_ERROR(status);
    return times;
  }

  absl::Status Enqueue(const RequestSpec& spec, const Transfer& t, const Placement& p) {
    cudaStream_t stream = stream_.get();
    CUDA_RETURN_IF_ERROR(cudaEventRecord(start_.get(), stream), ordinal_);
    if (!p.chunked.empty()) RETURN_IF_ERROR(chunked_->Enqueue(p.chunked, stream));
    if (p.from_heap) RETURN_IF_ERROR(heap_copies_.Enqueue(stream));  // one call (h2d_batch.h)
    const struct {
      const void* to;
      const char* from;
      int64_t bytes;
    } copies_in[] = {{p.q, p.q_from, t.q}, {p.k, p.k_from, t.kv}, {p.v, p.v_from, t.kv}};
    for (const auto& c : copies_in) {
      if (c.from == nullptr) continue;  // copied above, or read in place (CUDA region)
      CUDA_RETURN_IF_ERROR(cudaMemcpyAsync(const_cast<void*>(c.to), c.from, c.bytes,
                                           cudaMemcpyHostToDevice, stream),
                           ordinal_);
    }
    if (t.cu > 0) {
      CUDA_RETURN_IF_ERROR(
          cudaMemcpyAsync(d_cu_q_.get(), StagedCu(0), t.cu, cudaMemcpyHostToDevice, stream),
          ordinal_);
      CUDA_RETURN_IF_ERROR(
          cudaMemcpyAsync(d_cu_k_.get(), StagedCu(1), t.cu, cudaMemcpyHostToDevice, stream),
          ordinal_);
    }
    // Poisoned where the kernel writes (this executor's buffers or a CUDA
    // region), so rows it fails to write read as NaN, never as stale data.
    CUDA_RETURN_IF_ERROR(cudaMemsetAsync(p.out, kOutputPoisonByte, t.q, stream), ordinal_);
    if (t.lse > 0) {
      CUDA_RETURN_IF_ERROR(cudaMemsetAsync(p.lse, kOutputPoisonByte, t.lse, stream), ordinal_);
    }
    CUDA_RETURN_IF_ERROR(cudaEventRecord(h2d_done_.get(), stream), ordinal_);

    AttentionArgs args =
        AttentionArgs::Contiguous(spec.problem, spec.dtype, p.q, p.k, p.v, p.out, p.lse);
    if (spec.problem.varlen) {
      args.cu_seqlens_q = static_cast<const int32_t*>(d_cu_q_.get());
      args.cu_seqlens_k = static_cast<const int32_t*>(d_cu_k_.get());
    }
    RETURN_IF_ERROR(spec.kernel->Run(args, stream));
    CUDA_RETURN_IF_ERROR(cudaEventRecord(kernel_done_.get(), stream), ordinal_);
    if (p.out_to != nullptr) {
      CUDA_RETURN_IF_ERROR(
          cudaMemcpyAsync(p.out_to, p.out, t.q, cudaMemcpyDeviceToHost, stream), ordinal_);
    }
    if (t.lse > 0 && p.lse_to != nullptr) {
      CUDA_RETURN_IF_ERROR(
          cudaMemcpyAsync(p.lse_to, p.lse, t.lse, cudaMemcpyDeviceToHost, stream), ordinal_);
    }
    CUDA_RETURN_IF_ERROR(cudaEventRecord(d2h_done_.get(), stream), ordinal_);
    return absl::OkStatus();
  }

  const int ordinal_;
  const std::string name_;
  const BufferSizes sizes_;
  const std::shared_ptr<ParallelCopier> copier_;  // shared by every executor
  bool healthy_ = true;  // read and written on the worker thread only
  CudaStream stream_;
  CudaEvent start_, h2d_done_, kernel_done_, d2h_done_;
  DeviceBuffer d_q_, d_k_, d_v_, d_out_, d_lse_, d_cu_q_, d_cu_k_;
  PinnedBuffer h_in_;   // q, k, v, cu_seqlens_q, cu_seqlens_k
  PinnedBuffer h_out_;  // o, lse
  // Buffers lent to responses (o, lse laid out as in h_out_).
  std::shared_ptr<PinnedOutputPool> lent_out_;
  // Inline inputs go through this ring in the front of h_in_ when set
  // (--staging_chunk_bytes), else are staged whole.
  std::unique_ptr<ChunkedUpload> chunked_;
  // The pinned heap's arena, page-locked (heap_arena.h): inline inputs
  // held in it are copied to the device straight from their pieces, by
  // heap_copies_, listed anew for each request (ListHeapCopies).
  std::optional<HeapArena> dma_heap_;
  H2DBatch heap_copies_;
};

// RESOURCE_EXHAUSTED unless the device has room for every stream's buffers.
absl::Status CheckMemory(const DeviceInfo& device, int streams, const BufferSizes& sizes) {
  CUDA_RETURN_IF_ERROR(cudaSetDevice(device.ordinal), device.ordinal);
  size_t free_bytes = 0, total_bytes = 0;
  CUDA_RETURN_IF_ERROR(cudaMemGetInfo(&free_bytes, &total_bytes), device.ordinal);
  const double needed = static_cast<double>(sizes.Device()) * streams;
  if (needed > static_cast<double>(free_bytes)) {
    return absl::ResourceExhaustedError(absl::StrFormat(
        "cuda:%d (%s) has %.0f MiB free; %d streams (--streams_per_device) x (4 tensors of "
        "%.0f MiB (--max_tokens_per_request) + %.1f MiB LSE and offsets) need %.0f MiB",
        device.ordinal, device.name, free_bytes / 1048576.0, streams, sizes.tensor / 1048576.0,
        (sizes.lse + 2 * sizes.cu) / 1048576.0, needed / 1048576.0));
  }
  return absl::OkStatus();
}

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
  if (options.warmup_kernel == nullptr) {
    return absl::InternalError("CreateCudaExecutors: no warm-up kernel");
  }
  const BufferSizes sizes = BufferSizes::For(options.max_tensor_bytes, options.max_rows);
  std::vector<std::unique_ptr<Executor>> executors;
  const std::optional<HeapArena>& dma_heap = RegisterPinnedHeap();
  auto copier = std::make_shared<ParallelCopier>(
      options.copy_threads,
      options.streaming_staging ? kStreamingStagingMinBytes : std::numeric_limits<size_t>::max());
  for (const DeviceInfo& device : options.devices) {
    RETURN_IF_ERROR(CheckMemory(device, options.streams_per_device, sizes));
    for (int s = 0; s < options.streams_per_device; ++s) {
      ASSIGN_OR_RETURN(std::unique_ptr<CudaExecutor> executor,
                       CudaExecutor::Create(device, s, sizes, copier,
                                            options.staging_chunk_bytes, dma_heap));
      RETURN_IF_ERROR(executor->Warmup(*options.warmup_kernel));
      LOGF(kInfo,
           "%s ready: 4 x %.0f MiB tensor buffers + %.1f MiB LSE and offsets on the device, "
           "%.0f MiB pinned staging + %.0f MiB pinned memory lent to responses; %s",
           executor->Name(), sizes.tensor / 1048576.0, (sizes.lse + 2 * sizes.cu) / 1048576.0,
           (sizes.PinnedIn() + sizes.PinnedOut()) / 1048576.0,
           kLentOutputBuffers * sizes.PinnedOut() / 1048576.0, executor->StagingDescription());
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
