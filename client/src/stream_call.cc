#include "stream_call.h"

#include <algorithm>
#include <cstring>
#include <string>
#include <utility>

#include "absl/strings/str_cat.h"
#include "monotonic_clock.h"
#include "wire_codec.h"

namespace attn::internal {
namespace {

namespace pb = ::attnserve::v1;

constexpr pb::TensorName kTensorNames[] = {pb::TENSOR_Q, pb::TENSOR_K, pb::TENSOR_V};

grpc::Status Malformed(const std::string& what) {
  return grpc::Status(grpc::StatusCode::INTERNAL, absl::StrCat("malformed response stream: ", what));
}

}  // namespace

void AttendStreamCall::Start(pb::Attention::Stub* stub,
                             std::unique_ptr<grpc::ClientContext> context,
                             pb::AttendRequest header,
                             std::shared_ptr<const AttentionInputs> inputs, int64_t chunk_bytes,
                             int64_t start_ns, char* out_destination, StreamDone done) {
  const bool return_lse = header.return_lse();
  auto* call = new AttendStreamCall(std::move(context), std::move(inputs), chunk_bytes, start_ns,
                                    return_lse, out_destination, std::move(done));
  stub->async()->AttendStream(call->context_.get(), call);
  const int64_t marshal_start = MonotonicNanos();
  *call->write_msg_.mutable_header() = std::move(header);
  call->marshal_ns_ += MonotonicNanos() - marshal_start;
  call->StartWrite(&call->write_msg_);
  call->StartRead(&call->read_msg_);
  call->StartCall();
}

AttendStreamCall::AttendStreamCall(std::unique_ptr<grpc::ClientContext> context,
                                   std::shared_ptr<const AttentionInputs> inputs,
                                   int64_t chunk_bytes, int64_t start_ns, bool return_lse,
                                   char* out_destination, StreamDone done)
    : context_(std::move(context)),
      inputs_(std::move(inputs)),
      chunk_bytes_(std::max<int64_t>(chunk_bytes, 1)),
      start_ns_(start_ns),
      done_(std::move(done)),
      return_lse_(return_lse),
      out_destination_(out_destination) {}

void AttendStreamCall::WriteNext() {
  const absl::string_view tensors[] = {inputs_->QData(), inputs_->KData(), inputs_->VData()};
  while (tensor_index_ < 3 &&
         tensor_offset_ >= static_cast<int64_t>(tensors[tensor_index_].size())) {
    ++tensor_index_;
    tensor_offset_ = 0;
  }
  if (tensor_index_ == 3) {
    StartWritesDone();
    return;
  }
  const int64_t marshal_start = MonotonicNanos();
  const absl::string_view tensor = tensors[tensor_index_];
  const int64_t size =
      std::min<int64_t>(chunk_bytes_, static_cast<int64_t>(tensor.size()) - tensor_offset_);
  pb::TensorChunk* chunk = write_msg_.mutable_chunk();
  chunk->set_tensor(kTensorNames[tensor_index_]);
  chunk->set_offset(tensor_offset_);
  chunk->mutable_data()->assign(tensor.data() + tensor_offset_, static_cast<size_t>(size));
  tensor_offset_ += size;
  marshal_ns_ += MonotonicNanos() - marshal_start;
  StartWrite(&write_msg_);
}

void AttendStreamCall::OnWriteDone(bool ok) {
  // Not ok: the stream is closed (the server answered early with an error,
  // or the call was cancelled); OnDone reports why.
  if (ok) WriteNext();
}

void AttendStreamCall::OnWritesDoneDone(bool ok) {
  if (ok) upload_ns_ = MonotonicNanos() - start_ns_;
}

void AttendStreamCall::OnReadDone(bool ok) {
  if (!ok) return;  // end of the response stream
  const int64_t unmarshal_start = MonotonicNanos();
  grpc::Status status = Consume();
  unmarshal_ns_ += MonotonicNanos() - unmarshal_start;
  if (!status.ok()) {
    read_error_ = std::move(status);
    context_->TryCancel();
    return;
  }
  StartRead(&read_msg_);
}

grpc::Status AttendStreamCall::Consume() {
  if (!have_header_) {
    if (!read_msg_.has_header()) return Malformed("first message is not a header");
    absl::Status s = TakeResponseHeader(*read_msg_.mutable_header(), *inputs_, &result_);
    if (!s.ok()) return Malformed(std::string(s.message()));
    have_header_ = true;
    if (out_destination_ == nullptr) result_.out.resize(static_cast<size_t>(inputs_->QBytes()));
    if (return_lse_) lse_bytes_.resize(static_cast<size_t>(inputs_->LseElements() * 4));
    return grpc::Status::OK;
  }
  if (!read_msg_.has_chunk()) return Malformed("second header");
  return Append(read_msg_.chunk());
}

grpc::Status AttendStreamCall::Append(const pb::TensorChunk& chunk) {
  const int64_t size = static_cast<int64_t>(chunk.data().size());
  const int64_t out_bytes = inputs_->QBytes();
  const bool out_complete = received_ == out_bytes;
  char* tensor;           // where the chunk's tensor is assembled
  int64_t tensor_bytes;   // its whole size
  int64_t* received;
  if (chunk.tensor() == pb::TENSOR_OUT) {
    tensor = out_destination_ != nullptr ? out_destination_ : result_.out.data();
    tensor_bytes = out_bytes;
    received = &received_;
  } else if (chunk.tensor() == pb::TENSOR_LSE && return_lse_ && out_complete) {
    tensor = lse_bytes_.data();
    tensor_bytes = static_cast<int64_t>(lse_bytes_.size());
    received = &lse_received_;
  } else {
    return Malformed(absl::StrCat(
        "chunk of tensor ", pb::TensorName_Name(chunk.tensor()), ", expected ",
        out_complete && return_lse_ ? "TENSOR_LSE" : "TENSOR_OUT"));
  }
  if (chunk.offset() != *received || *received + size > tensor_bytes) {
    return Malformed(absl::StrCat(pb::TensorName_Name(chunk.tensor()), " chunk at offset ",
                                  chunk.offset(), " of ", size, " bytes after ", *received,
                                  " of ", tensor_bytes, " bytes"));
  }
  std::memcpy(tensor + *received, chunk.data().data(), static_cast<size_t>(size));
  *received += size;
  return grpc::Status::OK;
}

void AttendStreamCall::OnDone(const grpc::Status& status) {
  grpc::Status final_status = read_error_.ok() ? status : read_error_;
  if (final_status.ok() && (!have_header_ || received_ != inputs_->QBytes())) {
    final_status = Malformed(absl::StrCat("stream ended after ", received_, " of ",
                                          inputs_->QBytes(), " output bytes"));
  }
  if (final_status.ok() && lse_received_ != static_cast<int64_t>(lse_bytes_.size())) {
    final_status = Malformed(absl::StrCat("stream ended after ", lse_received_, " of ",
                                          lse_bytes_.size(), " LSE bytes"));
  }
  if (final_status.ok() && return_lse_) {
    const int64_t unmarshal_start = MonotonicNanos();
    absl::Status s = DecodeLse(lse_bytes_, inputs_->LseElements(), &result_.lse);
    if (!s.ok()) final_status = Malformed(std::string(s.message()));
    unmarshal_ns_ += MonotonicNanos() - unmarshal_start;
  }
  result_.client.marshal_ns = marshal_ns_;
  result_.client.unmarshal_ns = unmarshal_ns_;
  result_.client.upload_ns = upload_ns_;
  result_.client.streamed = true;
  result_.client.round_trip_ns = MonotonicNanos() - start_ns_;
  std::move(done_)(final_status, std::move(result_));
  delete this;
}

}  // namespace attn::internal
