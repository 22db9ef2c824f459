// SessionModel: the client's picture of KV-cache sessions, for checking a
// server's session calls (`attn_cli session --check`, the session suites):
// each session's bf16 K/V per layer, step requests with fresh random
// tokens, and the check of a step's response against float64 attention
// over the session's whole history (causal bottom-right, GQA, the default
// scale).
//
//   SessionModel model;
//   model.Add(id, {layers, heads_q, heads_kv, head_dim});
//   pb::AttendSessionsRequest request = model.NewStep(layer, {{id, 5}});
//   ... send it (lease_id set by the caller) ...
//   double worst = model.Check(request, response);  // appends k/v on success
#ifndef ATTN_CLIENT_TOOLS_SESSION_MODEL_H_
#define ATTN_CLIENT_TOOLS_SESSION_MODEL_H_

#include <cstdint>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "attnserve/v1/attention.pb.h"

namespace attn::tools {

class SessionModel {
 public:
  struct Geometry {
    int64_t layers = 1, hq = 1, hkv = 1, d = 64;
  };

  explicit SessionModel(uint32_t seed = 42);

  void Add(const std::string& id, const Geometry& g);
  // A fork: `child` starts with `parent`'s history.
  void Fork(const std::string& parent, const std::string& child);
  // Drops the last `tokens` tokens of every layer.
  void Truncate(const std::string& id, int64_t tokens);
  int64_t Tokens(const std::string& id, int64_t layer) const;

  // A step of `layer` for (session id, new tokens) pairs, with random bf16
  // q, k, v and return_lse set; lease_id is the caller's to set.
  attnserve::v1::AttendSessionsRequest NewStep(
      int64_t layer, const std::vector<std::pair<std::string, int64_t>>& steps);

  // Appends the request's k/v to the histories and returns the worst
  // absolute error of `response`'s outputs (and LSE / 8) against float64
  // attention; a non-finite output counts as 1e9. Also checks
  // layer_tokens (a mismatch counts as 1e9).
  double Check(const attnserve::v1::AttendSessionsRequest& request,
               const attnserve::v1::AttendSessionsResponse& response);

 private:
  struct History {
    Geometry g;
    std::vector<std::vector<float>> k, v;  // per layer: [tokens, hkv, d]
  };
  // `count` random bf16 values, uniform on [-1, 1), packed little-endian.
  std::string RandomBf16(size_t count);

  std::map<std::string, History> histories_;
  // splitmix64's state, and the bf16 pattern of each 16-bit draw: four
  // values per 64-bit draw with no float work, where mt19937 with
  // uniform_real_distribution did float work per value. A 64-session
  // prefill chunk is 50 M values: ~45 ms here on the 2-core VM.
  uint64_t rng_state_;
  std::vector<uint16_t> bf16_of_draw_;
};

}  // namespace attn::tools

#endif  // ATTN_CLIENT_TOOLS_SESSION_MODEL_H_
