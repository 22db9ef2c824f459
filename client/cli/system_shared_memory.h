// `attn_cli attend --shared_memory=system`: the call's tensors in one POSIX
// shared-memory object that this process creates and registers with the
// server as a system region, so that q, k and v go by reference and the
// server writes O (and the LSE) into it in place (attention.proto's
// HoldRegions; a same-host server started with --allow_shared_memory).
#ifndef ATTN_CLIENT_CLI_SYSTEM_SHARED_MEMORY_H_
#define ATTN_CLIENT_CLI_SYSTEM_SHARED_MEMORY_H_

#include <cstdint>
#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "attn/client/attend_types.h"
#include "attn/client/attention_client.h"
#include "attn/client/shared_memory.h"

namespace attn::cli {

// One call's tensors in a registered region, and the call that names them.
struct SystemShmCall {
  std::unique_ptr<SharedMemory> memory;
  attnserve::v1::RegionInfo region;
  AttentionInputs inputs;  // the geometry, with q, k, v by reference
  AttendOptions options;   // with out (and, asked for, the LSE) by reference
};

// Creates the object (q, k, v, O, LSE, each at a multiple of 64 bytes),
// copies `inputs`' tensors into it and registers it with `client`. The
// server's refusal (FAILED_PRECONDITION without --allow_shared_memory,
// PERMISSION_DENIED from another host) comes back as is.
absl::StatusOr<SystemShmCall> PlaceInSystemSharedMemory(AttentionClient& client,
                                                        const AttentionInputs& inputs,
                                                        const AttendOptions& options);

// Copies O and the LSE the server wrote into `result`, where an inline call
// would have them, so the output is printed, saved and checked as usual.
void TakeOutputs(const SystemShmCall& call, AttendResult* result);

// "/attn-12-0, 0.25 MiB, region attn_cli (a1b2c3d4…)"
std::string Describe(const SystemShmCall& call);

}  // namespace attn::cli

#endif  // ATTN_CLIENT_CLI_SYSTEM_SHARED_MEMORY_H_
