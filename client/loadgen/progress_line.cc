#include "progress_line.h"

#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <utility>

#include "absl/strings/str_format.h"
#include "absl/time/time.h"

namespace attn::loadgen {

bool StderrIsTerminal() { return isatty(STDERR_FILENO) == 1; }

ProgressLine::ProgressLine(const LevelRunner& runner, std::string label, bool enabled)
    : runner_(runner), label_(std::move(label)) {
  if (enabled) thread_ = std::thread([this] { Loop(); });
}

ProgressLine::~ProgressLine() {
  stop_.Notify();
  if (thread_.joinable()) {
    thread_.join();
    std::fputs("\r\033[K", stderr);  // erase the line
    std::fflush(stderr);
  }
}

void ProgressLine::Loop() {
  while (!stop_.WaitForNotificationWithTimeout(absl::Milliseconds(500))) {
    const LevelProgress p = runner_.Progress();
    std::string line;
    if (p.elapsed_ns < p.window_start_ns) {
      line = absl::StrFormat("[%s] warm-up %.1f/%.1f s", label_, p.elapsed_ns / 1e9,
                             p.window_start_ns / 1e9);
    } else {
      const double window = static_cast<double>(p.elapsed_ns - p.window_start_ns) / 1e9;
      const double length = static_cast<double>(p.window_end_ns - p.window_start_ns) / 1e9;
      line = absl::StrFormat(
          "[%s] %s %.1f/%.1f s  sent %d  ok %d  failed %d  in flight %d  %.1f req/s", label_,
          p.elapsed_ns < p.window_end_ns ? "measuring" : "draining", std::min(window, length),
          length, p.sent, p.ok, p.failed, p.in_flight,
          window > 0 ? static_cast<double>(p.ok) / window : 0.0);
    }
    std::fprintf(stderr, "\r\033[K%s", line.c_str());
    std::fflush(stderr);
  }
}

}  // namespace attn::loadgen
