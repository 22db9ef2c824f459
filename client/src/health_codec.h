// The two grpc.health.v1 messages as bytes, for the client's generic health
// call, through the stubs generated from grpc-proto's health.proto
// (client/proto/grpc/health/v1/health.proto, target attn_health_proto: the
// only copy in the build, so no binary registers the .proto twice).
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
