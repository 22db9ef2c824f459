// server/frontend/attend_stream_reactor.h
//
// AttendStreamReactor: one AttendStream call (see the proto for the
// protocol). It checks the header as soon as it arrives and checks every
// chunk as it arrives: in order per tensor, never past the tensor's size
// (StreamInputs, stream_inputs.h). Its bytes are admitted as they arrive
// (scheduling/admission.h): the header reserves a first window of the
// upload, each chunk keeps the reservation a window ahead, the outputs are
// reserved once the upload is complete. So a call never holds more than its
// problem needs, one that sends only a header holds one window, and all
// calls together never more than --max_stream_buffer_bytes. When the client half-closes with q, k
// and v complete, the job goes to the scheduler; the output goes back as a
// header and in-order chunks (TENSOR_OUT, then TENSOR_LSE with return_lse).
//
// Reactions only copy bytes and start the next read or write; they never
// block. The reactor deletes itself when gRPC calls OnDone.
//
// The call's buffers are held only for a bounded time: the StreamWatchdog
// ends an upload that stalls (--stream_idle_timeout_s) or takes too long
// (--stream_upload_timeout_s), one that is idle when the server drains, and
// a call whose client stops taking output chunks. Its reservations also
// count in the server-wide --max_admitted_bytes.
#ifndef ATTN_SERVER_ATTEND_STREAM_REACTOR_H_
#define ATTN_SERVER_ATTEND_STREAM_REACTOR_H_

#include <atomic>
#include <memory>
#include <optional>
#include <string>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "attnserve/v1/attention.grpc.pb.h"
#include "frontend/call_gate.h"
#include "frontend/stream_inputs.h"
#include "core/job.h"
#include "limits/stream_watchdog.h"
#include "runtime/runtime.h"
#include "observability/stats.h"

namespace attn::server {

class AttendStreamReactor final
    : public grpc::ServerBidiReactor<attnserve::v1::AttendStreamRequest,
                                     attnserve::v1::AttendStreamResponse>,
      private StreamWatchdog::Target {
 public:
  // Starts reading the call's first message. `gate` has admitted this call;
  // the reactor leaves it when done.
  AttendStreamReactor(Runtime* runtime, CallGate* gate, grpc::CallbackServerContext* context);
  ~AttendStreamReactor() override;

  void OnReadDone(bool ok) override ABSL_LOCKS_EXCLUDED(mu_);
  void OnWriteDone(bool ok) override;
  void OnCancel() override { cancelled_.store(true, std::memory_order_release); }
  void OnDone() override { delete this; }

 private:
  // Checks the header and reserves the call's bytes; *kind says how a
  // refusal counts.
  absl::Status OnHeader(const attnserve::v1::AttendRequest& header, FailureKind* kind)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // All input read (the client half-closed): check completeness, submit.
  void OnInputComplete();
  void OnJobDone(std::unique_ptr<Job> job, absl::Status status);
  void WriteNextChunk();
  void Fail(const absl::Status& status, FailureKind kind);
  // The input buffers and their stream-budget bytes go back.
  void ReleaseInputs();
  // What the call's bytes are for, in admission's refusals.
  std::string Describe() const;
  // CANCELLED/DEADLINE_EXCEEDED with who ended the call.
  void FailEnded(const absl::Status& status);
  // StreamWatchdog::Target: a timeout passed (see the file comment).
  void Expire(StreamWatchdog::Reason reason, absl::Duration limit) override ABSL_LOCKS_EXCLUDED(mu_);

  Runtime* const runtime_;
  CallGate* const gate_;
  grpc::CallbackServerContext* const context_;
  const absl::Time arrival_;
  absl::Time header_decoded_;
  std::string request_id_;

  attnserve::v1::AttendStreamRequest request_;
  attnserve::v1::AttendStreamResponse response_;
  std::optional<RequestSpec> spec_;  // set once the header passed
  StreamInputs inputs_;              // q, k, v as received so far
  std::string out_;
  std::string lse_;              // with return_lse
  AdmissionTicket ticket_;  // the call's bytes of both budgets (admission.h)
  int64_t out_sent_ = 0;
  int64_t lse_sent_ = 0;
  PhaseTimes times_;
  std::string device_;
  std::atomic<bool> cancelled_{false};

  // Reading (the reactions) against the watchdog ending the upload.
  absl::Mutex mu_;
  bool upload_ended_ ABSL_GUARDED_BY(mu_) = false;  // Finish was called during the upload
  // Why the watchdog cancelled the call while it sent the output.
  absl::Status send_expired_ ABSL_GUARDED_BY(mu_);
  StreamWatchdog::Watch watch_{this};
};

}  // namespace attn::server

#endif  // ATTN_SERVER_ATTEND_STREAM_REACTOR_H_
