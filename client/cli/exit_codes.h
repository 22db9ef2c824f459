// attn_cli's exit statuses, part of its contract with scripts (and with the
// container HEALTHCHECK, which only distinguishes 0 from the rest).
#ifndef ATTN_CLIENT_CLI_EXIT_CODES_H_
#define ATTN_CLIENT_CLI_EXIT_CODES_H_

namespace attn::cli {

inline constexpr int kExitOk = 0;
// The server could not be reached, an RPC failed, a file could not be read
// or written; for `health`, anything but SERVING.
inline constexpr int kExitFailure = 1;
// Bad command line.
inline constexpr int kExitUsage = 2;
// `attend --check`: the output's error exceeds the tolerance.
inline constexpr int kExitCheckFailed = 3;

}  // namespace attn::cli

#endif  // ATTN_CLIENT_CLI_EXIT_CODES_H_
