#!/usr/bin/env python3
"""A decode trace over the Python client (issue 32): N sequences, L layers,
a prompt of P tokens prefilled in chunks of C, then G generated tokens, each
step one call per layer for all N sequences. Two ways, same trace:

  sessions   the K/V cache lives on the server (KV-cache sessions): each
             call sends the step's new q/k/v and gets o back
  stateless  plain Attend: each call ships the whole cache of every
             sequence (what the service offered before sessions)

Reports decode tokens/s, per-layer-call latency p50/p99/p99.9 and bytes on
the wire per generated token (request tensors + output, both ways), as a
table and with --json as a file. With --check (the default) the client keeps
each sequence's K/V and checks sequence 0's output of every step's first
layer against float64 attention (relative L2 < 1e-2); it never times
checking. Needs a server with --kv_cache_bytes > 0 for the sessions mode.

  /usr/bin/python3 bench/session_trace.py --address 127.0.0.1:50051 \\
      --sessions 8 --layers 4 --prompt 256 --generate 32
"""
import argparse
import json
import sys
import time

import numpy as np

from attnserve_client import (
    Client,
    attention_reference,
    bf16_bits_to_float,
    float_to_bf16_bits,
    relative_l2_error,
)


def percentile(values, p):
    return float(np.percentile(np.asarray(values), p)) if values else float("nan")


class Trace:
    def __init__(self, args):
        self.args = args
        self.rng = np.random.default_rng(args.seed)
        self.k = [[np.zeros((0, args.kv_heads, args.head_dim), np.uint16)
                   for _ in range(args.layers)] for _ in range(args.sessions)]
        self.v = [[np.zeros((0, args.kv_heads, args.head_dim), np.uint16)
                   for _ in range(args.layers)] for _ in range(args.sessions)]

    def tokens(self, n, heads):
        return float_to_bf16_bits(self.rng.standard_normal((n, heads, self.args.head_dim)))

    def check(self, s, layer, q, out):
        f = lambda bits: bf16_bits_to_float(bits)[None].astype(np.float64)  # noqa: E731
        ref = attention_reference(f(q), f(self.k[s][layer]), f(self.v[s][layer]), causal=True)[0]
        got = bf16_bits_to_float(np.asarray(out).view(np.uint16).reshape(ref.shape))
        error = relative_l2_error(got.astype(np.float64), ref)
        if error >= 1e-2:
            sys.exit(f"session_trace: sequence {s} layer {layer} at "
                     f"{len(self.k[s][layer])} tokens: relative L2 error {error:.3g} >= 1e-2")
        return error


def run(client, args, mode):
    trace = Trace(args)
    a = args
    sessions = []
    if mode == "sessions":
        sessions = [client.open_session(num_layers=a.layers, num_heads=a.heads,
                                        kv_num_heads=a.kv_heads, head_dim=a.head_dim,
                                        max_tokens=a.prompt + a.generate)
                    for _ in range(a.sessions)]
    latencies, wire_bytes, checked = [], 0, []
    steps = [min(a.chunk, a.prompt - start) for start in range(0, a.prompt, a.chunk)]
    steps += [1] * a.generate
    decode_start = None
    try:
        for index, n in enumerate(steps):
            decoding = index >= len(steps) - a.generate
            if decoding and decode_start is None:
                decode_start = time.perf_counter()
            for layer in range(a.layers):
                q = [trace.tokens(n, a.heads) for _ in range(a.sessions)]
                kv = [(trace.tokens(n, a.kv_heads), trace.tokens(n, a.kv_heads))
                      for _ in range(a.sessions)]
                for s in range(a.sessions):
                    trace.k[s][layer] = np.concatenate([trace.k[s][layer], kv[s][0]])
                    trace.v[s][layer] = np.concatenate([trace.v[s][layer], kv[s][1]])
                start = time.perf_counter()
                if mode == "sessions":
                    result = client.attend_sessions(
                        layer, [(sessions[s], q[s], kv[s][0], kv[s][1])
                                for s in range(a.sessions)])
                    outs = result.outs
                    sent = sum(x.nbytes for x in q) + 2 * sum(k.nbytes for k, _ in kv)
                else:
                    qs = np.stack(q)
                    ks = np.stack([trace.k[s][layer] for s in range(a.sessions)])
                    vs = np.stack([trace.v[s][layer] for s in range(a.sessions)])
                    out, _ = client.attend(qs, ks, vs, dtype="bf16", causal=True)
                    outs = list(out)
                    sent = qs.nbytes + ks.nbytes + vs.nbytes
                elapsed = time.perf_counter() - start
                if decoding:
                    latencies.append(elapsed)
                    wire_bytes += sent + sum(np.asarray(o).nbytes for o in outs)
                if a.check and layer == 0:
                    checked.append(trace.check(0, layer, q[0], outs[0]))
        decode_s = time.perf_counter() - decode_start if decode_start else float("nan")
    finally:
        for session in sessions:
            session.close()
    generated = a.sessions * a.generate
    return {
        "mode": mode,
        "decode_tokens_per_s": generated / decode_s,
        "layer_call_p50_ms": 1e3 * percentile(latencies, 50),
        "layer_call_p99_ms": 1e3 * percentile(latencies, 99),
        "layer_call_p999_ms": 1e3 * percentile(latencies, 99.9),
        "wire_bytes_per_generated_token": wire_bytes / generated,
        "checked_steps": len(checked),
        "max_relative_l2": max(checked) if checked else None,
    }


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--address", default="127.0.0.1:50051")
    parser.add_argument("--modes", default="sessions,stateless")
    parser.add_argument("--sessions", type=int, default=8)
    parser.add_argument("--layers", type=int, default=4)
    parser.add_argument("--prompt", type=int, default=256)
    parser.add_argument("--chunk", type=int, default=128)
    parser.add_argument("--generate", type=int, default=32)
    parser.add_argument("--heads", type=int, default=32)
    parser.add_argument("--kv_heads", type=int, default=8)
    parser.add_argument("--head_dim", type=int, default=128)
    parser.add_argument("--seed", type=int, default=None)
    parser.add_argument("--no-check", dest="check", action="store_false")
    parser.add_argument("--transport", default="auto")
    parser.add_argument("--json", default="")
    args = parser.parse_args()
    rows = []
    with Client(args.address, transport=args.transport) as client:
        for mode in args.modes.split(","):
            rows.append(run(client, args, mode))
        backend = client.server_info().backend
    print(f"decode trace: {args.sessions} sequences, {args.layers} layers, prompt {args.prompt} "
          f"(chunks of {args.chunk}), {args.generate} generated, heads {args.heads}/"
          f"{args.kv_heads}, d={args.head_dim}, bf16; backend {backend}")
    print(f"{'mode':<10} {'tokens/s':>10} {'p50 ms':>9} {'p99 ms':>9} {'p99.9 ms':>9} "
          f"{'wire B/token':>13} {'checked':>8}")
    for r in rows:
        print(f"{r['mode']:<10} {r['decode_tokens_per_s']:10.1f} {r['layer_call_p50_ms']:9.3f} "
              f"{r['layer_call_p99_ms']:9.3f} {r['layer_call_p999_ms']:9.3f} "
              f"{r['wire_bytes_per_generated_token']:13.0f} {r['checked_steps']:8d}")
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"args": vars(args), "backend": backend, "rows": rows}, f, indent=2)


if __name__ == "__main__":
    main()
