// The timing breakdown `attn_cli attend` prints: where a call's time went,
// client side (marshal, network and gRPC, unmarshal) and server side
// (receive for streamed calls, decode, queue, H2D, kernel, D2H, other).
#ifndef ATTN_CLIENT_CLI_TIMING_TABLE_H_
#define ATTN_CLIENT_CLI_TIMING_TABLE_H_

#include <string>
#include <vector>

#include "attn/client/attend_types.h"

namespace attn::cli {

// One row per phase, in milliseconds, for calls of the same request: the
// value and its share of the round trip for one call; median, min and max
// for several. Rows partition the round trip (server rows are the server's
// own clock; "network + gRPC" is the remainder). `results` must not be empty.
// A split call's rows are its last shard's (ClientTiming::shards), followed
// by FormatShards of the last call.
std::string FormatTimingTable(const std::vector<AttendResult>& results);

// A split call's shards: which one the rows are, and the server's queue,
// kernel and total time per shard (min, max, sum). `result.shard_server`
// must not be empty.
std::string FormatShards(const AttendResult& result);

// "  tensors: q inline, k inline, v inline, out inline\n" (and the LSE when
// asked for): how each tensor travelled ("system_shm" in a system region,
// "cuda_ipc" in a CUDA one). Empty from a server before regions.
std::string FormatTensorPaths(const ServerTiming& server);

// Throughput lines: kernel TFLOP/s from the server's kernel time (a split
// call's shards summed: AttendResult::SummedKernelNs) and
// end-to-end TFLOP/s and tensor GB/s from the round trip, both at the median.
// `flops` is the call's (AttentionInputs::Flops: visible query-key pairs),
// `bytes` what it moves (Q, K, V in; O and LSE out).
std::string FormatThroughput(const std::vector<AttendResult>& results, double flops,
                             double bytes);

}  // namespace attn::cli

#endif  // ATTN_CLIENT_CLI_TIMING_TABLE_H_
