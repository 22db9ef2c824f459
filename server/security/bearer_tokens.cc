#include "security/bearer_tokens.h"

#include <algorithm>
#include <utility>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"

namespace attn::server {

bool ConstantTimeEquals(absl::string_view a, absl::string_view b) {
  // Every byte position up to the longer size is visited whatever the
  // contents; volatile keeps the compiler from ending the loop early.
  volatile unsigned char diff = a.size() == b.size() ? 0 : 1;
  const size_t n = std::max(a.size(), b.size());
  for (size_t i = 0; i < n; ++i) {
    const unsigned char x = i < a.size() ? static_cast<unsigned char>(a[i]) : 0;
    const unsigned char y = i < b.size() ? static_cast<unsigned char>(b[i]) : 0;
    diff = diff | (x ^ y);
  }
  return diff == 0;
}

BearerTokens::BearerTokens(std::vector<std::string> tokens) : tokens_(std::move(tokens)) {}

absl::Status BearerTokens::Missing() {
  return absl::UnauthenticatedError(
      "missing credential: this server requires the call metadata 'authorization: Bearer "
      "<token>' (attn_cli/attn_loadgen --token_file, Python Client(token=...))");
}

absl::Status BearerTokens::Check(absl::string_view authorization) const {
  return Identify(authorization).status();
}

absl::StatusOr<size_t> BearerTokens::Identify(absl::string_view authorization) const {
  constexpr absl::string_view kScheme = "bearer ";
  if (!absl::StartsWithIgnoreCase(authorization, kScheme)) {
    return absl::UnauthenticatedError(
        "malformed credential: the 'authorization' metadata must be 'Bearer <token>'");
  }
  const absl::string_view token =
      absl::StripAsciiWhitespace(authorization.substr(kScheme.size()));
  if (token.empty()) {
    return absl::UnauthenticatedError(
        "malformed credential: the 'authorization' metadata has no token after 'Bearer'");
  }
  size_t line = 0;  // 0: none matched
  for (size_t i = 0; i < tokens_.size(); ++i) {
    const bool equal = ConstantTimeEquals(token, tokens_[i]);
    line = equal && line == 0 ? i + 1 : line;
  }
  if (line == 0) {
    return absl::UnauthenticatedError(
        "invalid credential: the bearer token is not one this server accepts");
  }
  return line;
}

}  // namespace attn::server
