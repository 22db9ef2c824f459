// server/observability/log.h
//
// A minimal line logger for the server (Debian's Abseil 20220623 has no
// absl/log). Each call writes exactly one line to stderr, whole, so lines of
// concurrent threads never interleave:
//
//   2026-08-01T12:00:00.123456Z I request id=r1 rpc=Attend status=OK ...
//
// The level is process-wide (set once from --log_level in main); messages
// below it are dropped before they are formatted when callers check
// LogEnabled() first, as the LOGF macro does.
#ifndef ATTN_SERVER_LOG_H_
#define ATTN_SERVER_LOG_H_

#include <string>

#include "absl/strings/str_format.h"
#include "absl/strings/string_view.h"

namespace attn::server {

enum class LogLevel : int { kDebug = 0, kInfo = 1, kWarning = 2, kError = 3 };

// "debug", "info", "warning", "error".
absl::string_view LogLevelName(LogLevel level);
bool ParseLogLevel(absl::string_view text, LogLevel* level);

void SetLogLevel(LogLevel level);
LogLevel GetLogLevel();
inline bool LogEnabled(LogLevel level) {
  return static_cast<int>(level) >= static_cast<int>(GetLogLevel());
}

// Writes `message` as one line if `level` is enabled.
void Log(LogLevel level, absl::string_view message);

// Abseil flag support, so --log_level=warning parses into a LogLevel.
bool AbslParseFlag(absl::string_view text, LogLevel* level, std::string* error);
std::string AbslUnparseFlag(LogLevel level);

}  // namespace attn::server

// LOGF(kInfo, "listening on %s", address): formats only when enabled.
#define LOGF(level, ...)                                                                  \
  do {                                                                                    \
    if (::attn::server::LogEnabled(::attn::server::LogLevel::level)) {                    \
      ::attn::server::Log(::attn::server::LogLevel::level, absl::StrFormat(__VA_ARGS__)); \
    }                                                                                     \
  } while (false)

#endif  // ATTN_SERVER_LOG_H_
