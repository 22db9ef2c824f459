// The CUDA backend's executors (see cuda_executor.h). Compiled only when
// ATTN_HAVE_CUDA.
#include "cuda_executor.h"

#include <cuda_runtime.h>

#include <algorithm>
#include <cstring>
#include <utility>

#include "absl/strings/str_format.h"
#include "absl/time/clock.h"
#include "cuda_memory.h"
#include "log.h"
#include "status_util.h"

namespace attn::server {
namespace {

// Every bit set: NaN in both fp16 and bf16. The output buffer is filled with
// it before each kernel, so an element a kernel fails to write comes back as
// NaN instead of the previous request's value.
constexpr int kPoisonByte = 0xff;

int64_t EventNanos(cudaEvent_t from, cudaEvent_t to, int device, absl::Status* status) {
  float ms = 0.0f;
  const cudaError_t error = cudaEventElapsedTime(&ms, from, to);
  if (error != cudaSuccess && status->ok()) {
    *status = CudaStatus(error, "cudaEventElapsedTime", device, __FILE__, __LINE__);
  }
  return static_cast<int64_t>(static_cast<double>(ms) * 1e6);
}

// One stream of one device with everything a request needs, allocated once.
class CudaExecutor : public Executor {
 public:
  static absl::StatusOr<std::unique_ptr<CudaExecutor>> Create(const DeviceInfo& device,
                                                              int stream_index,
                                                              int64_t max_tensor_bytes) {
    const int ordinal = device.ordinal;
    CUDA_RETURN_IF_ERROR(cudaSetDevice(ordinal), ordinal);
    std::unique_ptr<CudaExecutor> e(new CudaExecutor(device, stream_index, max_tensor_bytes));
    const size_t bytes = static_cast<size_t>(max_tensor_bytes);
    ASSIGN_OR_RETURN(e->stream_, CreateStream(ordinal));
    ASSIGN_OR_RETURN(e->start_, CreateEvent(ordinal, false));
    ASSIGN_OR_RETURN(e->h2d_done_, CreateEvent(ordinal, false));
    ASSIGN_OR_RETURN(e->kernel_done_, CreateEvent(ordinal, false));
    ASSIGN_OR_RETURN(e->d2h_done_, CreateEvent(ordinal, /*blocking_sync=*/true));
    for (DeviceBuffer* buffer : {&e->d_q_, &e->d_k_, &e->d_v_, &e->d_out_}) {
      ASSIGN_OR_RETURN(*buffer, AllocateDevice(bytes, ordinal));
    }
    ASSIGN_OR_RETURN(e->h_in_, AllocatePinned(3 * bytes, ordinal));
    ASSIGN_OR_RETURN(e->h_out_, AllocatePinned(bytes, ordinal));
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

  // Runs `kernel` once on zeroed inputs of a small shape it accepts.
  absl::Status Warmup(const KernelInfo& kernel) {
    const int64_t head_dim = kernel.head_dim > 0 ? kernel.head_dim : 64;
    const int64_t seq_multiple = std::max(1, kernel.seq_multiple);
    const int64_t seq_len = seq_multiple * ((128 + seq_multiple - 1) / seq_multiple);
    const Shape shape{1, seq_len, 1, head_dim};
    const int64_t bytes = shape.NumElements() * 2;
    if (bytes > capacity_) {
      LOGF(kWarning, "%s: no warm-up (shape %s exceeds --max_tokens_per_request)", name_,
           shape.ToString());
      return absl::OkStatus();
    }
    RETURN_IF_ERROR(BindToThread());
    for (const DeviceBuffer* buffer : {&d_q_, &d_k_, &d_v_}) {
      CUDA_RETURN_IF_ERROR(cudaMemsetAsync(buffer->get(), 0, bytes, stream_.get()), ordinal_);
    }
    const absl::Status launched =
        Forward(DeviceArgs(shape, DType::kBFloat16, 0.0f), kernel.name, stream_.get());
    CUDA_RETURN_IF_ERROR(cudaStreamSynchronize(stream_.get()), ordinal_);
    if (!launched.ok()) {
      return absl::Status(launched.code(), absl::StrFormat("warm-up of kernel '%s' on %s: %s",
                                                           kernel.name, name_, launched.message()));
    }
    CUDA_RETURN_IF_ERROR(cudaGetLastError(), ordinal_);
    return absl::OkStatus();
  }

  absl::Status Run(Job& job) override {
    absl::Status status = RunOnStream(job);
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

 private:
  absl::Status RunOnStream(Job& job) {
    const RequestSpec& spec = job.spec;
    const int64_t bytes = spec.TensorBytes();
    if (spec.kernel.backend != Backend::kCuda) {
      return absl::InternalError(
          absl::StrFormat("%s given kernel '%s' of another backend", name_, spec.kernel.name));
    }
    if (bytes > capacity_) {  // the front end's token limit makes this unreachable
      return absl::ResourceExhaustedError(absl::StrFormat(
          "request needs %d bytes per tensor; %s has buffers of %d (--max_tokens_per_request)",
          bytes, name_, capacity_));
    }
    RETURN_IF_ERROR(BindToThread());
    job.device = name_;

    // Stage Q, K, V into pinned memory so the copies below are truly async.
    const absl::Time stage_start = absl::Now();
    char* staged = static_cast<char*>(h_in_.get());
    std::memcpy(staged, job.q.data(), bytes);
    std::memcpy(staged + capacity_, job.k.data(), bytes);
    std::memcpy(staged + 2 * capacity_, job.v.data(), bytes);
    const int64_t stage_ns = ToNanos(absl::Now() - stage_start);

    // Enqueue copy-in, poison, kernel, copy-out, with events between them.
    absl::Status status = Enqueue(spec, bytes);
    // Whatever was enqueued must finish before the buffers are reused, even
    // when a later step failed to enqueue.
    const cudaError_t synced = cudaEventSynchronize(d2h_done_.get());
    if (!status.ok()) {
      cudaStreamSynchronize(stream_.get());
      return status;
    }
    RETURN_IF_ERROR(
        CudaStatus(synced, "cudaEventSynchronize(d2h_done)", ordinal_, __FILE__, __LINE__));

    const int64_t h2d_ns = EventNanos(start_.get(), h2d_done_.get(), ordinal_, &status);
    const int64_t kernel_ns = EventNanos(h2d_done_.get(), kernel_done_.get(), ordinal_, &status);
    const int64_t d2h_ns = EventNanos(kernel_done_.get(), d2h_done_.get(), ordinal_, &status);
    RETURN_IF_ERROR(status);

    const absl::Time unstage_start = absl::Now();
    job.out->assign(static_cast<const char*>(h_out_.get()), static_cast<size_t>(bytes));
    const int64_t unstage_ns = ToNanos(absl::Now() - unstage_start);

    job.times.h2d_ns = stage_ns + h2d_ns;
    job.times.kernel_ns = kernel_ns;
    job.times.d2h_ns = d2h_ns + unstage_ns;
    return absl::OkStatus();
  }

  CudaExecutor(const DeviceInfo& device, int stream_index, int64_t capacity)
      : ordinal_(device.ordinal),
        name_(
            absl::StrFormat("%s (cuda:%d, stream %d)", device.name, device.ordinal, stream_index)),
        capacity_(capacity) {}

  AttentionArgs DeviceArgs(const Shape& shape, DType dtype, float softmax_scale) const {
    AttentionArgs args;
    args.q = {d_q_.get(), dtype, shape};
    args.k = {d_k_.get(), dtype, shape};
    args.v = {d_v_.get(), dtype, shape};
    args.out = {d_out_.get(), dtype, shape};
    args.softmax_scale = softmax_scale;
    return args;
  }

  absl::Status Enqueue(const RequestSpec& spec, int64_t bytes) {
    cudaStream_t stream = stream_.get();
    const char* staged = static_cast<const char*>(h_in_.get());
    CUDA_RETURN_IF_ERROR(cudaEventRecord(start_.get(), stream), ordinal_);
    CUDA_RETURN_IF_ERROR(cudaMemcpyAsync(d_q_.get(), staged, bytes, cudaMemcpyHostToDevice, stream),
                         ordinal_);
    CUDA_RETURN_IF_ERROR(
        cudaMemcpyAsync(d_k_.get(), staged + capacity_, bytes, cudaMemcpyHostToDevice, stream),
        ordinal_);
    CUDA_RETURN_IF_ERROR(
        cudaMemcpyAsync(d_v_.get(), staged + 2 * capacity_, bytes, cudaMemcpyHostToDevice, stream),
        ordinal_);
    CUDA_RETURN_IF_ERROR(cudaMemsetAsync(d_out_.get(), kPoisonByte, bytes, stream), ordinal_);
    CUDA_RETURN_IF_ERROR(cudaEventRecord(h2d_done_.get(), stream), ordinal_);
    RETURN_IF_ERROR(
        Forward(DeviceArgs(spec.shape, spec.dtype, spec.softmax_scale), spec.kernel.name, stream));
    CUDA_RETURN_IF_ERROR(cudaEventRecord(kernel_done_.get(), stream), ordinal_);
    CUDA_RETURN_IF_ERROR(
        cudaMemcpyAsync(h_out_.get(), d_out_.get(), bytes, cudaMemcpyDeviceToHost, stream),
        ordinal_);
    CUDA_RETURN_IF_ERROR(cudaEventRecord(d2h_done_.get(), stream), ordinal_);
    return absl::OkStatus();
  }

  const int ordinal_;
  const std::string name_;
  const int64_t capacity_;  // bytes of each tensor buffer
  bool healthy_ = true;     // read and written on the worker thread only
  CudaStream stream_;
  CudaEvent start_, h2d_done_, kernel_done_, d2h_done_;
  DeviceBuffer d_q_, d_k_, d_v_, d_out_;
  PinnedBuffer h_in_;  // q, k, v at offsets 0, capacity_, 2 * capacity_
  PinnedBuffer h_out_;
};

// RESOURCE_EXHAUSTED unless the device has room for every stream's buffers.
absl::Status CheckMemory(const DeviceInfo& device, int streams, int64_t max_tensor_bytes) {
  CUDA_RETURN_IF_ERROR(cudaSetDevice(device.ordinal), device.ordinal);
  size_t free_bytes = 0, total_bytes = 0;
  CUDA_RETURN_IF_ERROR(cudaMemGetInfo(&free_bytes, &total_bytes), device.ordinal);
  const double needed = 4.0 * static_cast<double>(max_tensor_bytes) * streams;
  if (needed > static_cast<double>(free_bytes)) {
    return absl::ResourceExhaustedError(absl::StrFormat(
        "cuda:%d (%s) has %.0f MiB free; %d streams (--streams_per_device) x 4 buffers x "
        "%.0f MiB (--max_tokens_per_request) need %.0f MiB",
        device.ordinal, device.name, free_bytes / 1048576.0, streams, max_tensor_bytes / 1048576.0,
        needed / 1048576.0));
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<std::vector<std::unique_ptr<Executor>>> CreateCudaExecutors(
    const CudaExecutorOptions& options) {
  std::vector<std::unique_ptr<Executor>> executors;
  for (const DeviceInfo& device : options.devices) {
    RETURN_IF_ERROR(CheckMemory(device, options.streams_per_device, options.max_tensor_bytes));
    for (int s = 0; s < options.streams_per_device; ++s) {
      ASSIGN_OR_RETURN(std::unique_ptr<CudaExecutor> executor,
                       CudaExecutor::Create(device, s, options.max_tensor_bytes));
      RETURN_IF_ERROR(executor->Warmup(options.warmup_kernel));
      LOGF(kInfo, "%s ready: 4 x %.0f MiB device buffers, %.0f MiB pinned staging",
           executor->Name(), options.max_tensor_bytes / 1048576.0,
           4.0 * options.max_tensor_bytes / 1048576.0);
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
