#include "health_codec.h"

#include "grpc/health/v1/health.pb.h"

namespace attn::internal {

std::string EncodeHealthCheckRequest(absl::string_view service) {
  grpc::health::v1::HealthCheckRequest request;
  request.set_service(std::string(service));
  return request.SerializeAsString();
}

absl::StatusOr<int> DecodeHealthCheckResponse(absl::string_view bytes) {
  grpc::health::v1::HealthCheckResponse response;
  if (!response.ParseFromArray(bytes.data(), static_cast<int>(bytes.size()))) {
    return absl::InternalError("malformed HealthCheckResponse");
  }
  return static_cast<int>(response.status());
}

}  // namespace attn::internal
