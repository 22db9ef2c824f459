#include "scheduling/admission.h"

#include <algorithm>
#include <utility>

#include "absl/strings/str_format.h"

namespace attn::server {

AdmissionTicket& AdmissionTicket::operator=(AdmissionTicket&& other) noexcept {
  if (this != &other) {
    Release();
    admission_ = std::exchange(other.admission_, nullptr);
    peer_ = std::move(other.peer_);
    admitted_ = std::exchange(other.admitted_, 0);
    stream_ = std::exchange(other.stream_, 0);
  }
  return *this;
}

void AdmissionTicket::Release() {
  if (admission_ != nullptr && (admitted_ > 0 || stream_ > 0)) {
    admission_->Return(*this, admitted_, stream_);
  }
  admitted_ = 0;
  stream_ = 0;
}

AdmissionTicket Admission::Open(absl::string_view peer) {
  AdmissionTicket ticket;
  ticket.admission_ = this;
  ticket.peer_ = std::string(peer);
  return ticket;
}

absl::StatusOr<AdmissionTicket> Admission::AdmitCall(absl::string_view peer, int64_t bytes,
                                                     absl::string_view rpc,
                                                     absl::string_view what) {
  AdmissionTicket ticket = Open(peer);
  if (absl::Status taken = Reserve(ticket, bytes, 0, rpc, what); !taken.ok()) return taken;
  return ticket;
}

absl::StatusOr<AdmissionTicket> Admission::AdmitStream(absl::string_view peer,
                                                       int64_t input_bytes,
                                                       int64_t output_bytes,
                                                       absl::string_view what) {
  AdmissionTicket ticket = Open(peer);
  const int64_t call = input_bytes + output_bytes;
  const int64_t first = call <= limits_.stream_window_bytes ? call : limits_.stream_window_bytes;
  if (absl::Status taken = Reserve(ticket, first, first, "AttendStream", what); !taken.ok()) {
    return taken;
  }
  return ticket;
}

absl::Status Admission::GrowStream(AdmissionTicket& ticket, int64_t received, int64_t input_bytes,
                                   absl::string_view what) {
  if (received <= ticket.stream_) return absl::OkStatus();
  const int64_t to = std::min(input_bytes, received + limits_.stream_window_bytes);
  const int64_t more = std::max(to, received) - ticket.stream_;
  return Reserve(ticket, more, more, "AttendStream", what);
}

absl::Status Admission::AdmitStreamOutputs(AdmissionTicket& ticket, int64_t input_bytes,
                                           int64_t output_bytes, absl::string_view what) {
  const int64_t more = input_bytes + output_bytes - ticket.stream_;
  if (more <= 0) return absl::OkStatus();
  return Reserve(ticket, more, more, "AttendStream", what);
}

void Admission::ReleaseStreamInputs(AdmissionTicket& ticket, int64_t input_bytes) {
  const int64_t bytes = std::min(input_bytes, ticket.stream_);
  if (bytes > 0) Return(ticket, 0, bytes);
}

int64_t Admission::admitted_used() const {
  absl::MutexLock lock(&mu_);
  return admitted_used_;
}

int64_t Admission::stream_used() const {
  absl::MutexLock lock(&mu_);
  return stream_used_;
}

absl::Status Admission::Refusal(Budget budget, int64_t asked, int64_t peer_held,
                                int64_t peer_others, absl::string_view rpc,
                                absl::string_view what) const {
  const bool admitted = budget == Budget::kAdmitted;
  const int64_t used = admitted ? admitted_used_ : stream_used_;
  const int64_t limit = admitted ? limits_.admitted_bytes : limits_.stream_bytes;
  const char* flag = admitted ? "--max_admitted_bytes" : "--max_stream_buffer_bytes";
  if (asked > limit - used) {
    return absl::ResourceExhaustedError(
        admitted ? absl::StrFormat("%s needs %d bytes (%s); %d of %d are held by admitted calls "
                                   "(%s); retry later",
                                   rpc, asked, what, used, limit, flag)
                 : absl::StrFormat("%s needs %d bytes of buffers (%s); %d of %d are held by "
                                   "other calls (%s); retry later",
                                   rpc, asked, what, used, limit, flag));
  }
  return absl::ResourceExhaustedError(absl::StrFormat(
      "%s needs %d bytes (%s); this caller already holds %d of the %d of %s in %d bytes of other "
      "calls, and one caller may hold at most %.0f%% of them while it has several "
      "(--max_peer_share=%g); retry when its other calls have finished",
      rpc, asked, what, peer_held, limit, flag, peer_others, 100.0 * limits_.peer_share,
      limits_.peer_share));
}

absl::Status Admission::Reserve(AdmissionTicket& ticket, int64_t admitted, int64_t stream,
                                absl::string_view rpc, absl::string_view what) {
  admitted = std::max<int64_t>(admitted, 0);
  stream = std::max<int64_t>(stream, 0);
  absl::MutexLock lock(&mu_);
  PeerHolds& peer = peers_[ticket.peer_];
  const struct {
    Budget budget;
    int64_t asked, used, limit, peer_held, ticket_held;
  } checks[] = {
      {Budget::kAdmitted, admitted, admitted_used_, limits_.admitted_bytes, peer.admitted,
       ticket.admitted_},
      {Budget::kStream, stream, stream_used_, limits_.stream_bytes, peer.stream, ticket.stream_},
  };
  for (const auto& c : checks) {
    if (c.asked == 0) continue;
    const int64_t others = c.peer_held - c.ticket_held;  // this peer's other calls
    const bool fits = c.asked <= c.limit - c.used;
    const bool within_share =
        others == 0 || static_cast<double>(c.peer_held + c.asked) <=
                           limits_.peer_share * static_cast<double>(c.limit);
    if (!fits || !within_share) {
      absl::Status refused = Refusal(c.budget, c.asked, c.peer_held, others, rpc, what);
      if (peer.admitted == 0 && peer.stream == 0) peers_.erase(ticket.peer_);
      return refused;
    }
  }
  admitted_used_ += admitted;
  stream_used_ += stream;
  peer.admitted += admitted;
  peer.stream += stream;
  ticket.admitted_ += admitted;
  ticket.stream_ += stream;
  return absl::OkStatus();
}

void Admission::Return(AdmissionTicket& ticket, int64_t admitted, int64_t stream) {
  absl::MutexLock lock(&mu_);
  admitted_used_ -= admitted;
  stream_used_ -= stream;
  ticket.admitted_ -= admitted;
  ticket.stream_ -= stream;
  auto it = peers_.find(ticket.peer_);
  if (it == peers_.end()) return;
  it->second.admitted -= admitted;
  it->second.stream -= stream;
  if (it->second.admitted == 0 && it->second.stream == 0) peers_.erase(it);
}

}  // namespace attn::server
