// `attn_cli attend`: one remote attention call (or several of the same
// request) from a shell, on random inputs or .npy files, with the timing
// breakdown, an optional .npy output and an optional float64 check.
#ifndef ATTN_CLIENT_CLI_ATTEND_COMMAND_H_
#define ATTN_CLIENT_CLI_ATTEND_COMMAND_H_

#include <cstdint>
#include <optional>
#include <ostream>
#include <string>
#include <vector>

#include "attn/client/attend_types.h"
#include "attn/client/attention_client.h"
#include "reference_check.h"

namespace attn::cli {

struct AttendCommandOptions {
  // Shape of random Q inputs (ignored when .npy inputs are given).
  Shape shape{1, 128, 4, 64};
  // Shape of random K and V: [batch, kv_seq_len, kv_num_heads, head_dim];
  // unset: Q's. Its batch and head_dim must be Q's.
  std::optional<Shape> kv_shape;
  // Varlen: batch + 1 token offsets each (both or neither). Random inputs
  // then take batch and the longest lengths from them, the heads and
  // head_dim from `shape` / `kv_shape`; .npy inputs are 3-D [total, H, D].
  std::vector<int32_t> cu_seqlens_q, cu_seqlens_k;
  // Unset: the .npy files' dtype, else bf16.
  std::optional<DType> dtype;
  // .npy inputs: all three or none.
  std::string q_path, k_path, v_path;
  // Where to write the output as .npy; empty: not written.
  std::string out_path;
  // Where to write the LSE as float32 .npy ([B, H, S], varlen [H, total_q]);
  // implies call.return_lse. Empty: not written.
  std::string lse_out_path;
  // Seed of random inputs; unset: a fresh one (printed, for replay).
  std::optional<uint64_t> seed;
  AttendOptions call;
  // Calls of the same request; the table then shows median/min/max.
  int repeat = 1;
  bool check = false;
  double tolerance = kDefaultTolerance;
  // Query rows checked per (batch, head); 0 = all (see CheckAgainstReference).
  int64_t check_rows = 256;
  // --shared_memory=system: the tensors go by reference, in a POSIX
  // shared-memory object registered with the server (system_shared_memory.h).
  bool system_shared_memory = false;
};

// Loads or draws the inputs, runs the calls, prints the report to `out` and
// problems to `err`. Returns an exit code (exit_codes.h).
int RunAttend(AttentionClient& client, const AttendCommandOptions& options, std::ostream& out,
              std::ostream& err);

}  // namespace attn::cli

#endif  // ATTN_CLIENT_CLI_ATTEND_COMMAND_H_
