// server/job.h
//
// The unit of work between the RPC front end, the scheduler and the
// executors: one decoded attention request, the buffers it reads and writes,
// and its timing. No gRPC or CUDA types: the scheduler and executors never
// see protos, and the front end never sees devices.
//
// Ownership: the front end owns the input and output memory a Job points to
// and keeps it alive until the Job's `done` callback has run.
#ifndef ATTN_SERVER_JOB_H_
#define ATTN_SERVER_JOB_H_

#include <atomic>
#include <cstdint>
#include <memory>
#include <string>

#include "absl/functional/any_invocable.h"
#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "attn/attention.h"
#include "attn/tensor.h"

namespace attn::server {

// A validated request: what to compute, before any bytes are looked at.
struct RequestSpec {
  std::string request_id;
  DType dtype = DType::kBFloat16;
  Shape shape;
  float softmax_scale = 0.0f;  // 0: 1/sqrt(head_dim)
  KernelInfo kernel;           // resolved for this server's backend and shape

  // Bytes of each of Q, K, V and O.
  int64_t TensorBytes() const { return shape.NumElements() * 2; }
  // 4*B*H*S*S*D: multiply-adds of Q·Kᵀ and P·V, two flops each.
  double Flops() const {
    return 4.0 * static_cast<double>(shape.batch) * static_cast<double>(shape.num_heads) *
           static_cast<double>(shape.seq_len) * static_cast<double>(shape.seq_len) *
           static_cast<double>(shape.head_dim);
  }
};

// Where a request's time went, in nanoseconds (the proto's Timing). Parts
// are disjoint; total covers arrival to response-ready and includes them.
struct PhaseTimes {
  int64_t receive_ns = 0;  // AttendStream: header to last input chunk
  int64_t decode_ns = 0;   // validating the request and building the job
  int64_t queue_ns = 0;    // waiting for a worker
  int64_t h2d_ns = 0;      // staging and copying Q, K, V to the device
  int64_t kernel_ns = 0;   // the attention kernel
  int64_t d2h_ns = 0;      // copying O back and out of staging
  int64_t total_ns = 0;
};

struct Job;
// Runs once per submitted job, with the job handed back and its outcome.
using JobDone = absl::AnyInvocable<void(std::unique_ptr<Job> job, absl::Status status)>;

struct Job {
  RequestSpec spec;
  // Inputs, spec.TensorBytes() each, little-endian 16-bit elements.
  absl::string_view q, k, v;
  // Output: the executor resizes it to spec.TensorBytes() and writes O.
  std::string* out = nullptr;

  absl::Time arrival;                            // total_ns counts from here
  absl::Time deadline = absl::InfiniteFuture();  // the client's deadline
  // Set by the front end when the client cancels; may be null.
  const std::atomic<bool>* cancelled = nullptr;

  PhaseTimes times;
  std::string device;  // filled by the executor that ran it, e.g. "cpu (2 threads)"
  JobDone done;

  bool Cancelled() const {
    return cancelled != nullptr && cancelled->load(std::memory_order_acquire);
  }
};

// Whole nanoseconds in `d` (saturating).
inline int64_t ToNanos(absl::Duration d) { return absl::ToInt64Nanoseconds(d); }

}  // namespace attn::server

#endif  // ATTN_SERVER_JOB_H_
