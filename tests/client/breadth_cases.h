// The FlashAttention-2 feature cases the end-to-end client suites send to
// the CPU-backend server, and the float64 check of their results, shared by
// the C++ client's suite and its C ABI's.
#ifndef ATTN_TESTS_CLIENT_BREADTH_CASES_H_
#define ATTN_TESTS_CLIENT_BREADTH_CASES_H_

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "attn/client/attend_types.h"
#include "server_process.h"

namespace attn::testing {

// The server's message limit the cases are sized for: 3 x 64 KiB requests,
// and case 1 below, must stream.
inline constexpr int64_t kBreadthMaxMessageBytes = 96 * 1024;

// The CPU-backend attn_server (one thread) with that limit.
absl::StatusOr<std::unique_ptr<ServerProcess>> StartBreadthServer();

struct BreadthCase {
  const char* name;
  AttentionInputs geometry;  // bf16; everything but the tensors
  AttendOptions options;
};

// GQA with kv_seq_len > seq_len, causal, LSE; MQA with a window and LSE,
// large enough (80 KiB of q) to stream under a 96 KiB message limit; varlen
// with an empty sequence, causal, LSE.
std::vector<BreadthCase> BreadthCases();

// Expects `out` (raw 16-bit) and `lse` (empty unless options.return_lse) to
// match the float64 reference of `in` under `options`: relative L2 error
// below 1e-2, LSE within 1e-3 and -inf exactly where a row sees no key.
void ExpectMatchesReference(const AttentionInputs& in, const AttendOptions& options,
                            const std::string& out, const std::vector<float>& lse);

}  // namespace attn::testing

#endif  // ATTN_TESTS_CLIENT_BREADTH_CASES_H_
