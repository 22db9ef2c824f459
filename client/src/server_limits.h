// A call checked against the limits a server announced (ServerInfo
// limits), before its tensors exist: so a caller learns what the server
// would refuse without building or sending gigabytes of inputs.
#ifndef ATTN_CLIENT_SRC_SERVER_LIMITS_H_
#define ATTN_CLIENT_SRC_SERVER_LIMITS_H_

#include "absl/status/status.h"
#include "attn/client/attend_types.h"
#include "attnserve/v1/attention.pb.h"

namespace attn::internal {

// max_tokens_per_request as the proto defines it: the elements of each
// tensor on its own, Q (and O) batch*seq_len*num_heads*head_dim, K and V
// batch*kv_seq_len*kv_num_heads*head_dim (varlen: packed tokens, at least
// one per sequence). RESOURCE_EXHAUSTED naming the tensor, its shape and
// the limit, the code the server answers with; OK when the limit is 0
// (not announced). Reads only the geometry of `inputs`.
absl::Status CheckTokenLimit(const AttentionInputs& inputs,
                             const attnserve::v1::ServerLimits& limits);

}  // namespace attn::internal

#endif  // ATTN_CLIENT_SRC_SERVER_LIMITS_H_
