#!/usr/bin/env python3
"""The peer of the throughput table (issue 11): the straightforward server a
user would write instead of attnserve — a Python grpcio server that speaks
attnserve.v1 and calls PyTorch's scaled_dot_product_attention on the GPU.

It answers Attend (dense requests: q, k, v [B, S, H, D], GQA, causal, scale),
GetServerInfo (so attn_loadgen and the clients connect as to attnserve) and
GetStats (empty), with gRPC's message limits raised to 2 GiB - 1. Every
response's backend says what it is. For measurement only: no validation
beyond what torch does, no streaming, no LSE, no varlen.

  PYTHONPATH=<bundle>/python python3 torch_grpc_server.py --port_file=/tmp/port
  attn_loadgen --address=127.0.0.1:$(cat /tmp/port) --shape=1,4096,16,128 ...
"""
import argparse
import concurrent.futures
import os
import time
import warnings

import grpc
import torch
import torch.nn.functional as F

from attnserve.v1 import attention_pb2 as pb
from attnserve.v1 import attention_pb2_grpc as pb_grpc

BACKEND = "peer: python grpcio + pytorch sdpa (bench/peers/torch_grpc_server.py)"
MAX_MESSAGE = 2**31 - 1
DTYPES = {pb.DTYPE_BFLOAT16: torch.bfloat16, pb.DTYPE_FLOAT16: torch.float16}

# torch.frombuffer warns that request bytes are read-only; they are only read.
warnings.filterwarnings("ignore", message="The given buffer is not writable")


class Peer(pb_grpc.AttentionServicer):
    def Attend(self, request, context):
        start = time.perf_counter_ns()
        dtype = DTYPES.get(request.dtype)
        if dtype is None:
            context.abort(grpc.StatusCode.INVALID_ARGUMENT, "dtype must be bf16 or fp16")
        s = request.shape
        kv_len, kv_heads = s.kv_seq_len or s.seq_len, s.kv_num_heads or s.num_heads

        def tensor(data, length, heads):
            t = torch.frombuffer(data, dtype=dtype).view(s.batch, length, heads, s.head_dim)
            return t.to("cuda").transpose(1, 2)  # SDPA wants [B, H, S, D]

        q = tensor(request.q, s.seq_len, s.num_heads)
        k = tensor(request.k, kv_len, kv_heads)
        v = tensor(request.v, kv_len, kv_heads)
        if kv_heads != s.num_heads:
            k = k.repeat_interleave(s.num_heads // kv_heads, dim=1)
            v = v.repeat_interleave(s.num_heads // kv_heads, dim=1)
        scale = request.softmax_scale if request.HasField("softmax_scale") else None
        out = F.scaled_dot_product_attention(q, k, v, is_causal=request.causal, scale=scale)
        out = out.transpose(1, 2).contiguous().cpu()
        response = pb.AttendResponse(
            request_id=request.request_id, dtype=request.dtype, shape=request.shape,
            out=out.view(torch.uint8).numpy().tobytes(), kernel="torch sdpa", backend=BACKEND,
            device=torch.cuda.get_device_name())
        response.timing.total_ns = time.perf_counter_ns() - start
        return response

    def GetServerInfo(self, request, context):
        info = pb.ServerInfo(version="peer", backend=BACKEND)
        info.limits.max_message_bytes = MAX_MESSAGE
        info.dtypes.extend([pb.DTYPE_BFLOAT16, pb.DTYPE_FLOAT16])
        d = info.devices.add()
        d.ordinal, d.name = 0, torch.cuda.get_device_name()
        return info

    def GetStats(self, request, context):
        return pb.ServerStats()


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--port", type=int, default=0, help="0: a free port")
    ap.add_argument("--port_file", default="", help="write the bound port here once serving")
    ap.add_argument("--workers", type=int, default=16, help="gRPC handler threads")
    args = ap.parse_args()
    server = grpc.server(
        concurrent.futures.ThreadPoolExecutor(max_workers=args.workers),
        options=[("grpc.max_send_message_length", MAX_MESSAGE),
                 ("grpc.max_receive_message_length", MAX_MESSAGE)])
    pb_grpc.add_AttentionServicer_to_server(Peer(), server)
    port = server.add_insecure_port(f"127.0.0.1:{args.port}")
    torch.zeros(1, device="cuda")  # CUDA context before the first request
    server.start()
    if args.port_file:
        with open(args.port_file + ".tmp", "w") as f:
            f.write(f"{port}\n")
        os.replace(args.port_file + ".tmp", args.port_file)
    server.wait_for_termination()


if __name__ == "__main__":
    main()
