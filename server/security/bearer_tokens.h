// server/security/bearer_tokens.h
//
// BearerTokens: the tokens a server accepts, and the check of one call's
// `authorization` metadata value against them. Pure (no gRPC), so every
// answer is unit-tested; auth_processor.h applies it to each call.
//
// Comparison is constant-time in the token bytes: the time taken depends on
// the lengths only, never on how many leading bytes of a guess are right,
// and every accepted token is compared (no early exit on a match).
#ifndef ATTN_SERVER_SECURITY_BEARER_TOKENS_H_
#define ATTN_SERVER_SECURITY_BEARER_TOKENS_H_

#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace attn::server {

class BearerTokens {
 public:
  // `tokens` must not be empty (attn::ReadTokenFile guarantees it).
  explicit BearerTokens(std::vector<std::string> tokens);

  // OK when `authorization` is "Bearer <token>" (scheme case-insensitive,
  // RFC 6750) with an accepted token. Otherwise UNAUTHENTICATED saying
  // which: malformed, or not accepted. `authorization` is never echoed.
  absl::Status Check(absl::string_view authorization) const;
  // The same check; on success, which token it was (its line in the token
  // file, from 1): the caller's identity, never the token itself.
  absl::StatusOr<size_t> Identify(absl::string_view authorization) const;

  // The answer for a call without `authorization` metadata.
  static absl::Status Missing();

  size_t size() const { return tokens_.size(); }

 private:
  std::vector<std::string> tokens_;
};

// a == b in time that depends on the sizes only.
bool ConstantTimeEquals(absl::string_view a, absl::string_view b);

}  // namespace attn::server

#endif  // ATTN_SERVER_SECURITY_BEARER_TOKENS_H_
