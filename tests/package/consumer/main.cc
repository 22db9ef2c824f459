// consumer ADDRESS: checks health, then runs one bf16 attention call whose
// answer is known without a reference (V is 1.0 everywhere, so every output
// element is 1.0 whatever Q and K are). Exit 0 on success.
#include <cmath>
#include <cstdint>
#include <cstring>
#include <iostream>

#include "attn/client/attention_client.h"
#include "attn/version.h"

int main(int argc, char** argv) {
  if (argc != 2) {
    std::cerr << "usage: consumer ADDRESS\n";
    return 2;
  }
  std::cout << "consumer built against attnserve " << ATTN_VERSION_STRING << "\n";
  attn::ClientOptions options;
  options.address = argv[1];
  auto client = attn::AttentionClient::Connect(options);
  if (!client.ok()) {
    std::cerr << client.status() << "\n";
    return 1;
  }
  absl::StatusOr<attn::HealthStatus> health = (*client)->CheckHealth();
  if (!health.ok() || *health != attn::HealthStatus::kServing) {
    std::cerr << "health: " << (health.ok() ? attn::HealthStatusName(*health)
                                            : health.status().ToString()) << "\n";
    return 1;
  }

  attn::AttentionInputs inputs =
      attn::MakeRandomInputs(attn::Shape{1, 64, 2, 32}, attn::DType::kBFloat16, /*seed=*/7);
  for (size_t i = 0; i + 1 < inputs.v.size(); i += 2) {
    inputs.v[i] = static_cast<char>(0x80);  // bf16 1.0 = 0x3F80, little-endian
    inputs.v[i + 1] = static_cast<char>(0x3F);
  }
  absl::StatusOr<attn::AttendResult> result = (*client)->Attend(inputs);
  if (!result.ok()) {
    std::cerr << result.status() << "\n";
    return 1;
  }
  if (result->out.size() != inputs.q.size()) {
    std::cerr << "output has " << result->out.size() << " bytes, want " << inputs.q.size() << "\n";
    return 1;
  }
  for (size_t i = 0; i + 1 < result->out.size(); i += 2) {
    uint16_t bits;
    std::memcpy(&bits, result->out.data() + i, 2);
    uint32_t widened = uint32_t{bits} << 16;
    float value;
    std::memcpy(&value, &widened, 4);
    if (std::fabs(value - 1.0f) > 1e-2f) {
      std::cerr << "output element " << i / 2 << " is " << value << ", want 1\n";
      return 1;
    }
  }
  std::cout << "consumer: SERVING, attend ok on " << result->backend << " (" << result->kernel
            << ")\n";
  return 0;
}
