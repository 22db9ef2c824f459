#include "security/same_host.h"

#include "absl/strings/match.h"
#include "absl/strings/strip.h"

namespace attn::server {

bool IsSameHostPeer(absl::string_view peer) {
  if (absl::StartsWith(peer, "unix:") || absl::StartsWith(peer, "unix-abstract:")) return true;
  if (absl::ConsumePrefix(&peer, "ipv4:")) return absl::StartsWith(peer, "127.");
  if (absl::ConsumePrefix(&peer, "ipv6:")) {
    absl::ConsumePrefix(&peer, "[");
    return absl::StartsWith(peer, "::1]") || absl::StartsWith(peer, "::ffff:127.");
  }
  return false;
}

}  // namespace attn::server
