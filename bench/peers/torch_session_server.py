#!/usr/bin/env python3
"""The stateful peer of the KV-cache session trace (issue 32): what a user
would write instead of attnserve's sessions — a Python grpcio server that
speaks attnserve.v1's session RPCs and keeps each session's K/V in GPU
tensors, attending with PyTorch's scaled_dot_product_attention.

The cache is static, as Hugging Face's StaticCache is: at the first
OpenSession it preallocates, per layer, K and V of [--slots, kv_heads,
--max_tokens, head_dim] for that session's geometry; each session takes a
slot and its appends are slice assignments (no torch.cat). A step call
whose sessions hold consecutive slots with equal lengths and token counts
(attn_cli session's batches) runs one SDPA over views of the slots; any
other call runs one SDPA per session. GQA packs the query heads of each KV
group into query rows (K/V are not repeated); steps of several tokens add a
bottom-right causal mask. kernel_ns is the append and attention, timed with
CUDA events.

It answers HoldSessions (the lease: its end closes its sessions),
OpenSession, AttendSessions, CloseSession, ListSessions (empty list),
GetServerInfo and GetStats (empty), so attn_cli session drives it as it
drives attn_server. For measurement only: one geometry per process, no
truncate or fork, no admission control beyond the slot count.

  PYTHONPATH=<bundle>/python python3 torch_session_server.py --port_file=/tmp/port \\
      --slots=64 --max_tokens=8256
  attn_cli session --address=127.0.0.1:$(cat /tmp/port) --session_shape=8,32,8,128 ...
"""
import argparse
import concurrent.futures
import os
import secrets
import threading
import time
import warnings

import grpc
import torch
import torch.nn.functional as F

from attnserve.v1 import attention_pb2 as pb
from attnserve.v1 import attention_pb2_grpc as pb_grpc

BACKEND = "peer: python grpcio + pytorch sdpa, static kv cache (bench/peers/torch_session_server.py)"
MAX_MESSAGE = 2**31 - 1
DTYPES = {pb.DTYPE_BFLOAT16: torch.bfloat16, pb.DTYPE_FLOAT16: torch.float16}

# torch.frombuffer warns that request bytes are read-only; they are only read.
warnings.filterwarnings("ignore", message="The given buffer is not writable")


class Cache:
    """K and V of every slot for one geometry, per layer."""

    def __init__(self, config, slots, max_tokens):
        self.key = (config.dtype, config.num_layers, config.num_heads,
                    config.kv_num_heads or config.num_heads, config.head_dim)
        self.dtype = DTYPES[config.dtype]
        self.layers, self.heads_q, self.heads_kv, self.head_dim = self.key[1:]
        self.scale = config.softmax_scale if config.HasField("softmax_scale") else None
        self.max_tokens = max_tokens
        shape = (slots, self.heads_kv, max_tokens, self.head_dim)
        self.k = [torch.empty(shape, dtype=self.dtype, device="cuda") for _ in range(self.layers)]
        self.v = [torch.empty(shape, dtype=self.dtype, device="cuda") for _ in range(self.layers)]
        self.free = list(range(slots - 1, -1, -1))  # pop() gives the lowest slot


class Session:
    def __init__(self, slot, layers, max_tokens):
        self.slot = slot
        self.lengths = [0] * layers
        self.max_tokens = max_tokens


class Peer(pb_grpc.AttentionServicer):
    def __init__(self, slots, max_tokens):
        self.slots, self.max_tokens = slots, max_tokens
        self.lock = threading.Lock()
        self.cache = None
        self.leases = {}  # lease id -> {session id: Session}

    # --- leases and sessions -------------------------------------------------
    def HoldSessions(self, request, context):
        lease = secrets.token_hex(16)
        with self.lock:
            self.leases[lease] = {}
        ended = threading.Event()
        context.add_callback(ended.set)
        yield pb.HoldSessionsResponse(lease_id=lease)
        ended.wait()
        with self.lock:
            for s in self.leases.pop(lease, {}).values():
                self.cache.free.append(s.slot)

    def _lease(self, lease_id, context):
        sessions = self.leases.get(lease_id)
        if sessions is None:
            context.abort(grpc.StatusCode.NOT_FOUND, f"no lease {lease_id!r}")
        return sessions

    def OpenSession(self, request, context):
        c = request.config
        if c.dtype not in DTYPES:
            context.abort(grpc.StatusCode.INVALID_ARGUMENT, "config.dtype must be bf16 or fp16")
        if c.max_tokens > self.max_tokens:
            context.abort(grpc.StatusCode.RESOURCE_EXHAUSTED,
                          f"config.max_tokens {c.max_tokens} > --max_tokens {self.max_tokens}")
        with self.lock:
            sessions = self._lease(request.lease_id, context)
            if self.cache is None:
                self.cache = Cache(c, self.slots, self.max_tokens)
            key = (c.dtype, c.num_layers, c.num_heads, c.kv_num_heads or c.num_heads, c.head_dim)
            if key != self.cache.key:
                context.abort(grpc.StatusCode.INVALID_ARGUMENT,
                              f"config {key} is not this peer's geometry {self.cache.key}")
            if not self.cache.free:
                context.abort(grpc.StatusCode.RESOURCE_EXHAUSTED, f"all {self.slots} slots taken")
            session_id = secrets.token_hex(16)
            sessions[session_id] = Session(self.cache.free.pop(), c.num_layers, c.max_tokens)
        info = pb.SessionInfo(session_id=session_id, config=c, device=0)
        info.layer_tokens.extend([0] * c.num_layers)
        return pb.OpenSessionResponse(session=info)

    def CloseSession(self, request, context):
        with self.lock:
            s = self._lease(request.lease_id, context).pop(request.session_id, None)
            if s is None:
                context.abort(grpc.StatusCode.NOT_FOUND, f"no session {request.session_id!r}")
            self.cache.free.append(s.slot)
        return pb.CloseSessionResponse()

    def ListSessions(self, request, context):
        return pb.ListSessionsResponse()

    # --- the step call -------------------------------------------------------
    def AttendSessions(self, request, context):
        start_ns = time.perf_counter_ns()
        with self.lock:
            lease = self._lease(request.lease_id, context)
            try:
                sessions = [lease[s.session_id] for s in request.steps]
            except KeyError as e:
                context.abort(grpc.StatusCode.NOT_FOUND, f"no session {e}")
        cache, layer = self.cache, request.layer
        if not 0 <= layer < cache.layers:
            context.abort(grpc.StatusCode.INVALID_ARGUMENT, f"layer {layer} out of range")
        tokens = [s.tokens for s in request.steps]
        lengths = [s.lengths[layer] for s in sessions]
        if any(n + t > s.max_tokens for n, t, s in zip(lengths, tokens, sessions)):
            context.abort(grpc.StatusCode.INVALID_ARGUMENT, "an append exceeds max_tokens")
        total, d = sum(tokens), cache.head_dim
        q = torch.frombuffer(request.q, dtype=cache.dtype).view(total, cache.heads_q, d)
        k = torch.frombuffer(request.k, dtype=cache.dtype).view(total, cache.heads_kv, d)
        v = torch.frombuffer(request.v, dtype=cache.dtype).view(total, cache.heads_kv, d)
        q, k, v = q.to("cuda"), k.to("cuda"), v.to("cuda")
        begin, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        begin.record()
        slots = [s.slot for s in sessions]
        batched = (len(set(tokens)) == 1 and len(set(lengths)) == 1 and
                   slots == list(range(slots[0], slots[0] + len(slots))))
        want_lse = request.return_lse
        if batched:
            out, lse = self._attend(cache, layer, slice(slots[0], slots[0] + len(slots)),
                                    lengths[0], tokens[0], q, k, v, want_lse)
        else:
            parts, lses, at = [], [], 0
            for slot, length, n in zip(slots, lengths, tokens):
                o, l = self._attend(cache, layer, slice(slot, slot + 1), length, n,
                                    q[at:at + n], k[at:at + n], v[at:at + n], want_lse)
                parts.append(o)
                lses.append(l)
                at += n
            out = torch.cat(parts)
            lse = torch.cat(lses, dim=1) if want_lse else None
        end.record()
        out_bytes = out.contiguous().view(torch.uint8).cpu().numpy().tobytes()
        for s, n in zip(sessions, tokens):
            s.lengths[layer] += n
        response = pb.AttendSessionsResponse(
            request_id=request.request_id, out=out_bytes, kernel="torch sdpa", backend=BACKEND,
            device=torch.cuda.get_device_name())
        if lse is not None:
            response.lse = lse.contiguous().cpu().numpy().tobytes()
        response.layer_tokens.extend(s.lengths[layer] for s in sessions)
        response.timing.kernel_ns = int(begin.elapsed_time(end) * 1e6)
        response.timing.total_ns = time.perf_counter_ns() - start_ns
        return response

    @staticmethod
    def _attend(cache, layer, slots, length, n, q, k, v, want_lse=False):
        """Appends n tokens to each slot (all at `length`) and attends; q, k,
        v are [B * n, heads, d] in slot order; returns o [B * n, heads_q, d]
        and, with want_lse, the float32 LSE [heads_q, B * n] (attnserve's
        layout; computed apart from SDPA, which does not return it)."""
        batch = slots.stop - slots.start
        hq, hkv, d = cache.heads_q, cache.heads_kv, cache.head_dim
        keys, values = cache.k[layer][slots], cache.v[layer][slots]  # views [B, hkv, T, d]
        keys[:, :, length:length + n] = k.view(batch, n, hkv, d).transpose(1, 2)
        values[:, :, length:length + n] = v.view(batch, n, hkv, d).transpose(1, 2)
        keys, values = keys[:, :, :length + n], values[:, :, :length + n]
        # GQA without repeating K/V: each KV group's query heads become rows
        # of one query, [B, hkv, group * n, d] (row j * n + t: head j of the
        # group, token t), so K and V are read once per group.
        group = hq // hkv
        rows = q.view(batch, n, hkv, group, d).permute(0, 2, 3, 1, 4).reshape(
            batch, hkv, group * n, d)
        mask = None
        if n > 1:
            # Bottom-right causal: token t (at position length + t) sees
            # positions <= length + t.
            seen = length + torch.arange(n, device=q.device).repeat(group)
            mask = torch.arange(length + n, device=q.device)[None, :] <= seen[:, None]
        out = F.scaled_dot_product_attention(rows, keys, values, attn_mask=mask, scale=cache.scale)
        out = out.view(batch, hkv, group, n, d).permute(0, 3, 1, 2, 4)
        lse = None
        if want_lse:
            scale = cache.scale if cache.scale is not None else d ** -0.5
            scores = rows.float() @ keys.float().transpose(-1, -2) * scale
            if mask is not None:
                scores = scores.masked_fill(~mask, float("-inf"))
            lse = torch.logsumexp(scores, dim=-1).view(batch, hkv, group, n)
            lse = lse.permute(1, 2, 0, 3).reshape(hq, batch * n)
        return out.reshape(batch * n, hq, d), lse

    # --- what the clients ask first -------------------------------------------
    def GetServerInfo(self, request, context):
        info = pb.ServerInfo(version="peer", backend=BACKEND)
        info.limits.max_message_bytes = MAX_MESSAGE
        info.dtypes.extend([pb.DTYPE_BFLOAT16, pb.DTYPE_FLOAT16])
        info.sessions.enabled = True
        info.sessions.max_session_tokens = self.max_tokens
        info.sessions.max_steps_per_call = self.slots
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
    ap.add_argument("--slots", type=int, default=64, help="sessions the static cache holds")
    ap.add_argument("--max_tokens", type=int, default=8256, help="tokens per session and layer")
    args = ap.parse_args()
    server = grpc.server(
        concurrent.futures.ThreadPoolExecutor(max_workers=args.workers),
        options=[("grpc.max_send_message_length", MAX_MESSAGE),
                 ("grpc.max_receive_message_length", MAX_MESSAGE)])
    pb_grpc.add_AttentionServicer_to_server(Peer(args.slots, args.max_tokens), server)
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
