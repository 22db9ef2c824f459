#include "core/log.h"

#include <unistd.h>

#include <atomic>

#include "absl/time/clock.h"
#include "absl/time/time.h"

namespace attn::server {
namespace {

std::atomic<int> g_level{static_cast<int>(LogLevel::kInfo)};

char LevelLetter(LogLevel level) {
  switch (level) {
    case LogLevel::kDebug:
      return 'D';
    case LogLevel::kInfo:
      return 'I';
    case LogLevel::kWarning:
      return 'W';
    case LogLevel::kError:
      return 'E';
  }
  return '?';
}

}  // namespace

absl::string_view LogLevelName(LogLevel level) {
  switch (level) {
    case LogLevel::kDebug:
      return "debug";
    case LogLevel::kInfo:
      return "info";
    case LogLevel::kWarning:
      return "warning";
    case LogLevel::kError:
      return "error";
  }
  return "unknown";
}

bool ParseLogLevel(absl::string_view text, LogLevel* level) {
  for (LogLevel candidate :
       {LogLevel::kDebug, LogLevel::kInfo, LogLevel::kWarning, LogLevel::kError}) {
    if (text == LogLevelName(candidate)) {
      *level = candidate;
      return true;
    }
  }
  return false;
}

void SetLogLevel(LogLevel level) { g_level.store(static_cast<int>(level)); }

LogLevel GetLogLevel() { return static_cast<LogLevel>(g_level.load(std::memory_order_relaxed)); }

void Log(LogLevel level, absl::string_view message) {
  if (!LogEnabled(level)) return;
  std::string line = absl::FormatTime("%Y-%m-%dT%H:%M:%E6SZ", absl::Now(), absl::UTCTimeZone());
  line.push_back(' ');
  line.push_back(LevelLetter(level));
  line.push_back(' ');
  line.append(message.data(), message.size());
  line.push_back('\n');
  // One write(2) per line: POSIX keeps it whole relative to other writers.
  const char* data = line.data();
  size_t left = line.size();
  while (left > 0) {
    const ssize_t written = ::write(STDERR_FILENO, data, left);
    if (written <= 0) return;  // stderr is gone; nothing sensible to do
    data += written;
    left -= static_cast<size_t>(written);
  }
}

bool AbslParseFlag(absl::string_view text, LogLevel* level, std::string* error) {
  if (ParseLogLevel(text, level)) return true;
  *error = "must be one of debug, info, warning, error";
  return false;
}

std::string AbslUnparseFlag(LogLevel level) { return std::string(LogLevelName(level)); }

}  // namespace attn::server
