#include "attn/command_line.h"

#include <cstdlib>
#include <iostream>

#include "absl/base/config.h"
#include "absl/flags/internal/parse.h"
#include "absl/flags/internal/usage.h"
#include "absl/flags/usage.h"
#include "absl/flags/usage_config.h"
#include "absl/strings/match.h"
#include "absl/strings/string_view.h"
#include "absl/strings/strip.h"
#include "attn/version.h"

#ifndef ATTN_SOURCE_DIR
#error "ATTN_SOURCE_DIR must name the source tree (tools/CMakeLists.txt)"
#endif

namespace attn {
namespace {

// Set while Abseil parses argv. Abseil reports a bad command line by calling
// std::exit(1) from inside the parser (LTS 20220623 and later have no
// non-exiting public entry point that also reports bad values), so an
// atexit handler turns that exit into the usage status.
bool g_parsing = false;
std::string* g_program = nullptr;

void ExitWithUsageStatusWhileParsing() {
  if (!g_parsing) return;
  std::cout.flush();
  std::cerr << *g_program << ": bad command line (see --help)" << std::endl;
  std::_Exit(kExitUsage);
}

// A flag's file as --help shows it: relative to the source tree for ours,
// from "absl/" for Abseil's, never the build machine's directories. Ours
// come absolute, or relative to the build directory ("../server/main.cc")
// when ccache's base_dir made the compile's paths relative (test.sh).
std::string NormalizeFilename(absl::string_view path) {
  absl::string_view source_dir = ATTN_SOURCE_DIR "/";
  if (absl::ConsumePrefix(&path, source_dir)) return std::string(path);
  if (size_t absl_dir = path.rfind("absl/"); absl_dir != absl::string_view::npos) {
    return std::string(path.substr(absl_dir));
  }
  while (absl::ConsumePrefix(&path, "/") || absl::ConsumePrefix(&path, "./") ||
         absl::ConsumePrefix(&path, "../")) {
  }
  return std::string(path);
}

}  // namespace

const char* Version() { return ATTN_VERSION_STRING; }

std::vector<char*> ParseCommandLine(int argc, char** argv, const CommandLineSpec& spec) {
  absl::FlagsUsageConfig config;
  std::vector<std::string> help_files = spec.help_files;
  config.contains_help_flags = [help_files](absl::string_view path) {
    for (const std::string& file : help_files) {
      if (absl::EndsWith(path, file)) return true;
    }
    return false;
  };
  config.contains_helpshort_flags = config.contains_help_flags;
  std::string version_line = spec.program + " " + ATTN_VERSION_STRING + "\n";
  config.version_string = [version_line]() { return version_line; };
  config.normalize_filename = NormalizeFilename;
  absl::SetFlagsUsageConfig(config);
  absl::SetProgramUsageMessage(spec.usage);

  g_program = new std::string(spec.program);  // read at exit; never freed
  std::atexit(ExitWithUsageStatusWhileParsing);
  g_parsing = true;
  std::vector<char*> positional = absl::flags_internal::ParseCommandLineImpl(
      argc, argv,
#if defined(ABSL_LTS_RELEASE_VERSION) && ABSL_LTS_RELEASE_VERSION < 20230802
      absl::flags_internal::ArgvListAction::kRemoveParsedArgs,
#endif
      absl::flags_internal::UsageFlagsAction::kIgnoreUsage,
      absl::flags_internal::OnUndefinedFlag::kAbortIfUndefined);
  g_parsing = false;

  // -1: no usage flag; 0: --version (or --only_check_args); 1: one of the
  // --help flags, which Abseil before LTS 20230125 reports as 1. Asking for
  // help is a success.
  const int usage = absl::flags_internal::HandleUsageFlags(std::cout, absl::ProgramUsageMessage());
  if (usage != -1) {
    std::cout.flush();
    std::exit(0);
  }
  return positional;
}

}  // namespace attn
