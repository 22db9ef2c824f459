// attn/token_file.h
//
// The bearer-token file that attn_server (--token_file: every token it
// accepts) and the client tools (--token_file: the token they send) share:
// one token per line; surrounding whitespace is ignored, and blank lines and
// lines starting with '#' are skipped. A token is printable ASCII without
// spaces (what an HTTP/2 header value `Bearer <token>` can carry).
#ifndef ATTN_TOKEN_FILE_H_
#define ATTN_TOKEN_FILE_H_

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace attn {

// The tokens of the file at `path`, in file order. Errors name `flag`
// (e.g. "--token_file"): INVALID_ARGUMENT when the file cannot be read,
// holds no token, or a line holds a character a token cannot have.
absl::StatusOr<std::vector<std::string>> ReadTokenFile(const std::string& path,
                                                       absl::string_view flag);

}  // namespace attn

#endif  // ATTN_TOKEN_FILE_H_
