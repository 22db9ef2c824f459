// server/scheduling/admission.h
//
// Admission: the one place that decides a call's claim on the server's
// memory. Two budgets:
//   admitted  every call's tensors in messages, inputs and outputs, from
//             admission until its response has been sent
//             (--max_admitted_bytes)
//   stream    what AttendStream calls hold in their own buffers while they
//             upload and send (--max_stream_buffer_bytes)
// A call holds its reservations in an AdmissionTicket, which gives back all
// of them when destroyed (RAII, as CallGate does for drain), so no path can
// leak one; the KV-cache pages of sessions will be reserved the same way.
// The queue slot is not part of the ticket: it is the scheduler's bound,
// taken at Submit, since a call waiting for its upload holds no slot.
//
// Fair across callers. A peer (a connection, or a token's identity when
// tokens are on: frontend/peer_identity.h) may hold at most `peer_share` of
// a budget over several calls; the first call a peer holds is admitted
// whenever it fits, so every caller makes progress, but one caller's many
// calls cannot shut out the rest.
//
// Streams reserve as their bytes arrive: the header takes a first window of
// the upload (the whole call when it is smaller), each chunk keeps the
// reservation up to a window ahead of what arrived, and the outputs are
// reserved when the upload is complete. So an upload that sends only a
// header holds one window, whatever the size its header announces.
//
// Refusals are RESOURCE_EXHAUSTED naming the flag, the bytes asked for, the
// bytes held and the limit. Thread-safe.
#ifndef ATTN_SERVER_SCHEDULING_ADMISSION_H_
#define ATTN_SERVER_SCHEDULING_ADMISSION_H_

#include <cstdint>
#include <string>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/synchronization/mutex.h"

namespace attn::server {

class Admission;

// What one call holds; everything goes back when it is destroyed or
// Release()d. Movable, not copyable.
class AdmissionTicket {
 public:
  AdmissionTicket() = default;
  AdmissionTicket(AdmissionTicket&& other) noexcept { *this = std::move(other); }
  AdmissionTicket& operator=(AdmissionTicket&& other) noexcept;
  AdmissionTicket(const AdmissionTicket&) = delete;
  AdmissionTicket& operator=(const AdmissionTicket&) = delete;
  ~AdmissionTicket() { Release(); }

  int64_t admitted_bytes() const { return admitted_; }
  int64_t stream_bytes() const { return stream_; }
  // Gives every reservation back now; the ticket then holds nothing.
  void Release();

 private:
  friend class Admission;
  Admission* admission_ = nullptr;
  std::string peer_;
  int64_t admitted_ = 0;
  int64_t stream_ = 0;
};

struct AdmissionLimits {
  int64_t admitted_bytes = 0;  // --max_admitted_bytes
  int64_t stream_bytes = 0;    // --max_stream_buffer_bytes
  double peer_share = 1.0;     // --max_peer_share, in (0, 1]
  // How far ahead of the bytes that arrived an upload reserves.
  int64_t stream_window_bytes = int64_t{16} << 20;
};

class Admission {
 public:
  explicit Admission(const AdmissionLimits& limits) : limits_(limits) {}

  // A unary call from `peer` whose tensors in messages are `bytes` (they
  // have all arrived): taken from the admitted budget at once. `rpc` and
  // `what` name the call and its bytes in a refusal.
  absl::StatusOr<AdmissionTicket> AdmitCall(absl::string_view peer, int64_t bytes,
                                            absl::string_view rpc, absl::string_view what);

  // An AttendStream call from `peer` whose header announced `input_bytes`
  // of inputs and `output_bytes` of outputs: all of them when they fit in
  // one window, else the first window of the inputs, from both budgets.
  absl::StatusOr<AdmissionTicket> AdmitStream(absl::string_view peer, int64_t input_bytes,
                                              int64_t output_bytes, absl::string_view what);
  // The stream's upload will have `received` of its `input_bytes` once the
  // next chunk is in: its reservation is kept at least that, a window ahead
  // where it grows. Refused (nothing taken) when the budgets or the peer's
  // share cannot take it.
  absl::Status GrowStream(AdmissionTicket& ticket, int64_t received, int64_t input_bytes,
                          absl::string_view what);
  // The upload is complete: reserve the `output_bytes` too.
  absl::Status AdmitStreamOutputs(AdmissionTicket& ticket, int64_t input_bytes,
                                  int64_t output_bytes, absl::string_view what);
  // The job has read the inputs: their stream buffers go back (the
  // admitted bytes stay until the response has been sent).
  void ReleaseStreamInputs(AdmissionTicket& ticket, int64_t input_bytes);

  int64_t admitted_used() const;
  int64_t stream_used() const;
  const AdmissionLimits& limits() const { return limits_; }

 private:
  friend class AdmissionTicket;
  enum class Budget { kAdmitted, kStream };
  struct PeerHolds {
    int64_t admitted = 0, stream = 0;
  };

  // Takes `admitted` and `stream` more bytes for `ticket` (together or not
  // at all) or says why not.
  absl::Status Reserve(AdmissionTicket& ticket, int64_t admitted, int64_t stream,
                       absl::string_view rpc, absl::string_view what) ABSL_LOCKS_EXCLUDED(mu_);
  absl::Status Refusal(Budget budget, int64_t asked, int64_t peer_held, int64_t peer_others,
                       absl::string_view rpc, absl::string_view what) const
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void Return(AdmissionTicket& ticket, int64_t admitted, int64_t stream) ABSL_LOCKS_EXCLUDED(mu_);
  AdmissionTicket Open(absl::string_view peer);

  const AdmissionLimits limits_;
  mutable absl::Mutex mu_;
  int64_t admitted_used_ ABSL_GUARDED_BY(mu_) = 0;
  int64_t stream_used_ ABSL_GUARDED_BY(mu_) = 0;
  absl::flat_hash_map<std::string, PeerHolds> peers_ ABSL_GUARDED_BY(mu_);
};

}  // namespace attn::server

#endif  // ATTN_SERVER_SCHEDULING_ADMISSION_H_
