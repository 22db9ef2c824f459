// attn/http2_tuning.h
//
// HTTP/2 and TCP settings for connections that carry tensors, shared by the
// server and the C++ client (both apply them to their channels), so the two
// ends agree and the defaults live in one place.
//
// gRPC's defaults suit small messages: 16 KiB HTTP/2 frames, a 64 KiB
// initial stream window grown by BDP probing, and 8 KiB socket reads. A
// 48 MiB request then crosses about 3000 frames and thousands of reads and
// waits for window updates, which holds one connection to about 1 GB/s on
// loopback (issue 11). Every field 0 means "gRPC's default".
#ifndef ATTN_HTTP2_TUNING_H_
#define ATTN_HTTP2_TUNING_H_

#include <string>
#include <utility>
#include <vector>

#include "grpc/grpc.h"

namespace attn {

struct Http2Tuning {
  // SETTINGS_MAX_FRAME_SIZE this end advertises: the largest DATA frame the
  // peer may send it (HTTP/2 allows 16 KiB to 16 MiB - 1).
  int max_frame_bytes = 4 << 20;
  // Initial per-stream receive window ("lookahead"); BDP probing still grows
  // the window beyond it.
  int stream_window_bytes = 64 << 20;
  // Bytes the transport may hold for writing before it pushes back.
  int write_buffer_bytes = 8 << 20;
  // Socket reads start at this size and adapt up to max_read_chunk_bytes.
  int read_chunk_bytes = 1 << 20;
  int max_read_chunk_bytes = 16 << 20;
  // BDP probing (pings that size the window to the link): on by default in
  // gRPC; kept on.
  bool bdp_probe = true;

  // gRPC's own defaults throughout (for comparisons).
  static Http2Tuning GrpcDefaults() { return {0, 0, 0, 0, 0, true}; }

  // The non-default settings as gRPC channel arguments (name, value).
  std::vector<std::pair<std::string, int>> ChannelArgs() const {
    std::vector<std::pair<std::string, int>> args;
    auto add = [&args](const char* name, int value) {
      if (value > 0) args.emplace_back(name, value);
    };
    add(GRPC_ARG_HTTP2_MAX_FRAME_SIZE, max_frame_bytes);
    add(GRPC_ARG_HTTP2_STREAM_LOOKAHEAD_BYTES, stream_window_bytes);
    add(GRPC_ARG_HTTP2_WRITE_BUFFER_SIZE, write_buffer_bytes);
    add(GRPC_ARG_TCP_READ_CHUNK_SIZE, read_chunk_bytes);
    add(GRPC_ARG_TCP_MAX_READ_CHUNK_SIZE, max_read_chunk_bytes);
    if (!bdp_probe) args.emplace_back(GRPC_ARG_HTTP2_BDP_PROBE, 0);
    return args;
  }
};

}  // namespace attn

#endif  // ATTN_HTTP2_TUNING_H_
