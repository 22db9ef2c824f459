// A live one-line status of the running level on stderr, refreshed twice a
// second and erased when the level ends. Only for terminals: piped or
// redirected stderr (CI logs) gets nothing, so logs stay clean.
#ifndef ATTN_CLIENT_LOADGEN_PROGRESS_LINE_H_
#define ATTN_CLIENT_LOADGEN_PROGRESS_LINE_H_

#include <string>
#include <thread>

#include "absl/synchronization/notification.h"
#include "level_runner.h"

namespace attn::loadgen {

// True when stderr is a terminal.
bool StderrIsTerminal();

class ProgressLine {
 public:
  // Shows `runner`'s progress labelled `label` until destroyed; does nothing
  // when `enabled` is false.
  ProgressLine(const LevelRunner& runner, std::string label, bool enabled);
  ~ProgressLine();

  ProgressLine(const ProgressLine&) = delete;
  ProgressLine& operator=(const ProgressLine&) = delete;

 private:
  void Loop();

  const LevelRunner& runner_;
  const std::string label_;
  absl::Notification stop_;
  std::thread thread_;
};

}  // namespace attn::loadgen

#endif  // ATTN_CLIENT_LOADGEN_PROGRESS_LINE_H_
