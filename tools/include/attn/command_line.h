// The command-line conventions every attnserve binary follows (attn_server,
// attn_cli, attn_loadgen, attn_bench, attn_tune):
//
//   --help, --helpfull, --helpshort, --helpmatch=S   print usage, exit 0
//   --version                                        "<program> <attnserve version>", exit 0
//   an unknown flag or a malformed value             message on stderr, exit 2
//
// and --help names each flag's file relative to the source tree, never a
// build machine's path.
//
//   int main(int argc, char** argv) {
//     std::vector<char*> args = attn::ParseCommandLine(
//         argc, argv, {"attn_cli", kUsage, {"client/cli/main.cc"}});
//     ...
//     if (bad) return attn::kExitUsage;
//   }
#ifndef ATTN_TOOLS_COMMAND_LINE_H_
#define ATTN_TOOLS_COMMAND_LINE_H_

#include <string>
#include <vector>

namespace attn {

// Exit status of a bad command line, for every binary.
inline constexpr int kExitUsage = 2;

struct CommandLineSpec {
  // The binary's name, printed by --version.
  std::string program;
  // The text --help prints before the flags: what the program does, a
  // usage line and examples.
  std::string usage;
  // --help lists the flags defined in files whose path, relative to the
  // source tree, ends with one of these (e.g. "client/cli/main.cc"); the
  // flags of linked libraries (Abseil's, gRPC's) stay under --helpfull.
  std::vector<std::string> help_files;
};

// Parses argv with Abseil flags under the conventions above; returns the
// positional arguments, argv[0] first. Exits the process for --help,
// --version and usage errors. Call once, before any thread starts.
std::vector<char*> ParseCommandLine(int argc, char** argv, const CommandLineSpec& spec);

// The attnserve version, "MAJOR.MINOR.PATCH" (attn/version.h).
const char* Version();

}  // namespace attn

#endif  // ATTN_TOOLS_COMMAND_LINE_H_
