// The two grpc.health.v1 messages, encoded by hand.
//
// HealthCheckRequest is {string service = 1;} and HealthCheckResponse is
// {ServingStatus status = 1;}. Generating stubs would put a second copy of
// grpc/health/v1/health.proto into any binary that also links other
// generated health stubs (the test support library has some), and protobuf
// aborts when one .proto is registered twice; two fields are cheaper to
// encode than that coupling.
#ifndef ATTN_CLIENT_SRC_HEALTH_CODEC_H_
#define ATTN_CLIENT_SRC_HEALTH_CODEC_H_

#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace attn::internal {

inline constexpr char kHealthCheckMethod[] = "/grpc.health.v1.Health/Check";

// Serialized HealthCheckRequest for `service`.
std::string EncodeHealthCheckRequest(absl::string_view service);

// The status field of a serialized HealthCheckResponse (0 when absent, as
// proto3 omits a zero enum). Unknown fields are skipped. INTERNAL for bytes
// that are not a valid message.
absl::StatusOr<int> DecodeHealthCheckResponse(absl::string_view bytes);

}  // namespace attn::internal

#endif  // ATTN_CLIENT_SRC_HEALTH_CODEC_H_
