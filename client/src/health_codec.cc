#include "health_codec.h"

#include <cstdint>

namespace attn::internal {
namespace {

void AppendVarint(uint64_t value, std::string* out) {
  while (value >= 0x80) {
    out->push_back(static_cast<char>((value & 0x7f) | 0x80));
    value >>= 7;
  }
  out->push_back(static_cast<char>(value));
}

bool ReadVarint(absl::string_view* in, uint64_t* value) {
  *value = 0;
  for (int shift = 0; shift < 64 && !in->empty(); shift += 7) {
    const auto byte = static_cast<unsigned char>(in->front());
    in->remove_prefix(1);
    *value |= static_cast<uint64_t>(byte & 0x7f) << shift;
    if ((byte & 0x80) == 0) return true;
  }
  return false;
}

}  // namespace

std::string EncodeHealthCheckRequest(absl::string_view service) {
  std::string out;
  if (service.empty()) return out;  // proto3: the default is not written
  out.push_back(0x0a);              // field 1, length-delimited
  AppendVarint(service.size(), &out);
  out.append(service.data(), service.size());
  return out;
}

absl::StatusOr<int> DecodeHealthCheckResponse(absl::string_view bytes) {
  const absl::Status malformed = absl::InternalError("malformed HealthCheckResponse");
  int status = 0;
  while (!bytes.empty()) {
    uint64_t tag, value;
    if (!ReadVarint(&bytes, &tag)) return malformed;
    switch (tag & 7) {
      case 0:  // varint
        if (!ReadVarint(&bytes, &value)) return malformed;
        if ((tag >> 3) == 1) status = static_cast<int>(value);
        break;
      case 1:  // fixed64
        if (bytes.size() < 8) return malformed;
        bytes.remove_prefix(8);
        break;
      case 2:  // length-delimited
        if (!ReadVarint(&bytes, &value) || value > bytes.size()) return malformed;
        bytes.remove_prefix(value);
        break;
      case 5:  // fixed32
        if (bytes.size() < 4) return malformed;
        bytes.remove_prefix(4);
        break;
      default:
        return malformed;
    }
  }
  return status;
}

}  // namespace attn::internal
