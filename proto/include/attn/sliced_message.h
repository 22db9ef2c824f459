// attn/sliced_message.h
//
// SplitSlicedMessage: reads a serialized protobuf message from the gRPC
// slices it arrived in, and splits it in two without copying the bulk:
//   - chosen length-delimited fields (the tensors) become views of the
//     slices, a list of pieces each, and
//   - every other field is copied as it came, byte for byte, for the
//     generated parser to read (its rules for encodings, UTF-8, groups and
//     merging then apply to them exactly).
// The server's request reader takes Q, K, V this way (the executor copies
// them once, into pinned staging); the client's response reader takes O
// (copied once, into the caller's array or the result).
//
// Protobuf's rules hold: fields in any order, the last of repeated
// occurrences of a singular field wins, unknown fields are skipped, a chosen
// field number with another wire type is left to the generated parser. A
// body that is not valid wire format gives false, as the generated parser
// would (fuzz/attend_request_fuzzer.cc asserts that for AttendRequest).
#ifndef ATTN_SLICED_MESSAGE_H_
#define ATTN_SLICED_MESSAGE_H_

#include <string>
#include <vector>

#include "absl/strings/string_view.h"
#include "absl/types/span.h"
#include "grpcpp/support/slice.h"

namespace attn::wire {

// `fields`: the field numbers to take as views. On true, `pieces->at(i)`
// holds the bytes of the last occurrence of fields[i] (empty when it did
// not occur), pointing into `slices`, and `rest` every other field.
bool SplitSlicedMessage(const std::vector<grpc::Slice>& slices, absl::Span<const int> fields,
                        std::vector<std::vector<absl::string_view>>* pieces, std::string* rest);

}  // namespace attn::wire

#endif  // ATTN_SLICED_MESSAGE_H_
