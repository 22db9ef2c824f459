#include "attn/token_file.h"

#include <fstream>
#include <sstream>

#include "absl/status/status.h"
#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"

namespace attn {

absl::StatusOr<std::vector<std::string>> ReadTokenFile(const std::string& path,
                                                       absl::string_view flag) {
  std::ifstream file(path, std::ios::binary);
  if (!file) return absl::InvalidArgumentError(absl::StrCat(flag, ": cannot read '", path, "'"));
  std::ostringstream contents;
  contents << file.rdbuf();
  const std::string text = contents.str();

  std::vector<std::string> tokens;
  int line_number = 0;
  for (absl::string_view line : absl::StrSplit(text, '\n')) {
    ++line_number;
    line = absl::StripAsciiWhitespace(line);
    if (line.empty() || absl::StartsWith(line, "#")) continue;
    for (char c : line) {
      // Visible ASCII only: a header value cannot carry control bytes, and a
      // space would end the token after "Bearer ".
      if (c < 0x21 || c > 0x7e) {
        return absl::InvalidArgumentError(
            absl::StrCat(flag, ": line ", line_number, " of '", path,
                         "' has a space, control or non-ASCII byte inside its token"));
      }
    }
    tokens.emplace_back(line);
  }
  if (tokens.empty()) {
    return absl::InvalidArgumentError(absl::StrCat(flag, ": '", path, "' holds no token"));
  }
  return tokens;
}

}  // namespace attn
