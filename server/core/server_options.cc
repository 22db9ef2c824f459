#include "core/server_options.h"

namespace attn::server {

absl::string_view BackendChoiceName(BackendChoice choice) {
  switch (choice) {
    case BackendChoice::kAuto:
      return "auto";
    case BackendChoice::kCuda:
      return "cuda";
    case BackendChoice::kCpu:
      return "cpu";
    case BackendChoice::kTransportOnly:
      return "transport_only";
  }
  return "unknown";
}

bool AbslParseFlag(absl::string_view text, BackendChoice* choice, std::string* error) {
  for (BackendChoice candidate :
       {BackendChoice::kAuto, BackendChoice::kCuda, BackendChoice::kCpu,
        BackendChoice::kTransportOnly}) {
    if (text == BackendChoiceName(candidate)) {
      *choice = candidate;
      return true;
    }
  }
  *error = "must be one of auto, cuda, cpu, transport_only";
  return false;
}

std::string AbslUnparseFlag(BackendChoice choice) { return std::string(BackendChoiceName(choice)); }

}  // namespace attn::server
