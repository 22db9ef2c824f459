// fuzz/attend_stream_fuzzer.cc
//
// The request side of attn_server's AttendStream on arbitrary message
// sequences: the header's checks (DecodeRequestHeader,
// StreamInputs::CheckHeaderHasNoTensors) and the chunk assembly
// (StreamInputs), in the order the reactor applies them
// (frontend/attend_stream_reactor.cc): the first message must be a header,
// later ones chunks; the first refusal ends the call; at the end the
// tensors must be complete.
//
// Input: records of [2-byte little-endian length][a serialized
// attnserve.v1.AttendStreamRequest]; a record that does not parse ends the
// call, as a broken read would.
//
// Asserted: every refusal is INVALID_ARGUMENT (RESOURCE_EXHAUSTED for the
// token limit, NOT_FOUND/FAILED_PRECONDITION for the kernel) with a
// message; an accepted chunk appends exactly its bytes to its tensor, a
// refused one changes nothing; no tensor ever holds more than the header's
// shape needs; CheckComplete() is OK exactly when all three are full.
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <utility>

#include "absl/status/statusor.h"
#include "attnserve/v1/attention.pb.h"
#include "frontend/stream_inputs.h"
#include "scheduling/admission.h"
#include "frontend/tensor_codec.h"
#include "fuzz_check.h"
#include "server_fuzz_support.h"
#include "core/server_options.h"

namespace {

namespace pb = ::attnserve::v1;
using attn::server::InputTensor;
using attn::server::RequestSpec;
using attn::server::StreamInputs;

constexpr InputTensor kInputs[3] = {InputTensor::kQ, InputTensor::kK, InputTensor::kV};

void CheckHasMessage(const absl::Status& status) {
  FUZZ_CHECK(!status.message().empty(), "a refusal without a message: code %d",
             static_cast<int>(status.code()));
}

}  // namespace

extern "C" int LLVMFuzzerInitialize(int* /*argc*/, char*** /*argv*/) {
  attn::fuzz::SilenceProtobufLogs();
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  // Small limits: the buffers StreamInputs reserves stay small.
  attn::server::Limits limits;
  limits.max_tokens_per_request = int64_t{1} << 16;

  // A stream budget of a few windows, so uploads that outgrow it are
  // refused as the server refuses them (scheduling/admission.h).
  attn::server::Admission admission({/*admitted_bytes=*/1 << 18, /*stream_bytes=*/1 << 18,
                                     /*peer_share=*/1.0, /*stream_window_bytes=*/1 << 14});
  attn::server::AdmissionTicket ticket;
  std::optional<RequestSpec> spec;
  StreamInputs inputs;
  std::string expected[3];  // what each tensor must hold: the accepted chunks, in order
  size_t at = 0;
  while (at + 2 <= size) {
    const size_t length = data[at] | (static_cast<size_t>(data[at + 1]) << 8);
    at += 2;
    if (length > size - at) break;
    pb::AttendStreamRequest message;
    const bool parsed = message.ParseFromArray(data + at, static_cast<int>(length));
    at += length;
    if (!parsed) return 0;  // the read broke: the call ends

    if (!spec.has_value()) {
      if (!message.has_header()) return 0;  // refused: "the first message must be a header"
      absl::StatusOr<RequestSpec> decoded =
          attn::server::DecodeRequestHeader(message.header(), limits, attn::fuzz::CpuCatalog());
      if (!decoded.ok()) {
        attn::fuzz::CheckDecodeRefusal(decoded.status());
        return 0;
      }
      const absl::Status inline_tensors = StreamInputs::CheckHeaderHasNoTensors(message.header());
      if (!inline_tensors.ok()) {
        FUZZ_CHECK(inline_tensors.code() == absl::StatusCode::kInvalidArgument, "%s",
                   inline_tensors.ToString().c_str());
        CheckHasMessage(inline_tensors);
        return 0;
      }
      absl::StatusOr<attn::server::AdmissionTicket> admitted =
          admission.AdmitStream("fuzzer", decoded->InputBytes(),
                                decoded->OutputBytes(), "the fuzzed call");
      if (!admitted.ok()) {
        FUZZ_CHECK(admitted.status().code() == absl::StatusCode::kResourceExhausted, "%s",
                   admitted.status().ToString().c_str());
        return 0;
      }
      ticket = *std::move(admitted);
      spec = *std::move(decoded);
      inputs.Start(*spec);
      (void)inputs.ReceivedText();
      continue;
    }
    if (!message.has_chunk()) return 0;  // refused: a second header, or neither

    const pb::TensorChunk& chunk = message.chunk();
    const absl::Status added = inputs.Add(chunk, [&](int64_t received) {
      return admission.GrowStream(ticket, received, spec->InputBytes(), "the fuzzed call");
    });
    FUZZ_CHECK(ticket.stream_bytes() >= inputs.total_received(),
               "the call holds %lld bytes but reserved %lld",
               static_cast<long long>(inputs.total_received()),
               static_cast<long long>(ticket.stream_bytes()));
    const int index = chunk.tensor() == pb::TENSOR_Q   ? 0
                      : chunk.tensor() == pb::TENSOR_K ? 1
                      : chunk.tensor() == pb::TENSOR_V ? 2
                                                       : -1;
    if (!added.ok()) {
      FUZZ_CHECK(added.code() == absl::StatusCode::kInvalidArgument ||
                     added.code() == absl::StatusCode::kResourceExhausted,
                 "%s", added.ToString().c_str());
      CheckHasMessage(added);
      for (int i = 0; i < 3; ++i) {
        FUZZ_CHECK(attn::fuzz::Bytes(inputs.View(kInputs[i])) == expected[i],
                   "a refused chunk changed %s", attn::server::InputName(kInputs[i]));
      }
      (void)inputs.ReceivedText();
      return 0;  // the first refusal ends the call
    }
    FUZZ_CHECK(index >= 0, "a chunk of tensor %d was accepted", static_cast<int>(chunk.tensor()));
    FUZZ_CHECK(chunk.offset() == static_cast<int64_t>(expected[index].size()),
               "a chunk at offset %lld was accepted after %zu bytes",
               static_cast<long long>(chunk.offset()), expected[index].size());
    expected[index] += chunk.data();
    for (int i = 0; i < 3; ++i) {
      FUZZ_CHECK(attn::fuzz::Bytes(inputs.View(kInputs[i])) == expected[i],
                 "%s differs from its chunks", attn::server::InputName(kInputs[i]));
      FUZZ_CHECK(inputs.received(kInputs[i]) <= attn::server::InputBytes(*spec, kInputs[i]),
                 "%s holds more than its shape needs", attn::server::InputName(kInputs[i]));
    }
  }
  if (!spec.has_value()) return 0;  // "AttendStream ended before its header"

  // The client half-closed.
  bool full = true;
  for (int i = 0; i < 3; ++i) {
    full = full && inputs.received(kInputs[i]) == attn::server::InputBytes(*spec, kInputs[i]);
  }
  const absl::Status complete = inputs.CheckComplete();
  FUZZ_CHECK(complete.ok() == full, "CheckComplete says %s; full: %d",
             complete.ToString().c_str(), full);
  if (!complete.ok()) {
    FUZZ_CHECK(complete.code() == absl::StatusCode::kInvalidArgument, "%s",
               complete.ToString().c_str());
    CheckHasMessage(complete);
  }
  (void)inputs.ReceivedText();
  inputs.Release();
  return 0;
}
