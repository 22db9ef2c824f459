// Whole-file reads and writes for the client's files (.npy tensors, TLS
// certificates), whose errors say why, from errno: "cannot open 'q.npy':
// No such file or directory", with the matching code (NOT_FOUND,
// PERMISSION_DENIED, ...).
#ifndef ATTN_CLIENT_SRC_FILE_IO_H_
#define ATTN_CLIENT_SRC_FILE_IO_H_

#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace attn::internal {

absl::StatusOr<std::string> ReadWholeFile(const std::string& path);

// Creates or truncates `path` and writes `contents`.
absl::Status WriteWholeFile(const std::string& path, absl::string_view contents);

}  // namespace attn::internal

#endif  // ATTN_CLIENT_SRC_FILE_IO_H_
