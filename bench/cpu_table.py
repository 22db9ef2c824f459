#!/usr/bin/env python3
"""The CPU backend's table: attnserve's CPU kernel (libattn_c.so, "cpu_flash"
by default) beside PyTorch's CPU scaled_dot_product_attention on the same
tensors in one process, and the cores' fp32 GEMM rate (torch.mm, 4096^3).

Each cell: median wall time of --iters calls after --warmup (time.perf_counter;
both run synchronously on the host), as GFLOP/s of the visible work. The
kernel's output is checked against float64 SDPA on the same inputs (relative
L2) before it is timed; a row fails loudly if the error is over tolerance.

  python3 bench/cpu_table.py --lib bundle/lib/libattn_c.so [--threads 16]
"""
import argparse
import os
import statistics
import time

import torch
import torch.nn.functional as F

from attnlib import AttnLib, DTYPES

# (name, B, Sq, Sk, Hq, Hkv, D, causal): the rows.
ROWS = [
    ("1,1024,8,128", 1, 1024, 1024, 8, 8, 128, False),
    ("1,4096,16,128", 1, 4096, 4096, 16, 16, 128, False),
    ("1,4096,16,128 causal", 1, 4096, 4096, 16, 16, 128, True),
    ("decode 16,1:8192,32/8,128", 16, 1, 8192, 32, 8, 128, False),
]
TOLERANCE = {"bf16": 1e-2, "fp16": 2e-3}


def median_seconds(fn, warmup, iters):
    for _ in range(warmup):
        fn()
    times = []
    for _ in range(iters):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def flops(b, sq, sk, hq, d, causal):
    if causal:  # bottom-right: row i sees sk - sq + i + 1 keys
        pairs = sum(max(0, min(sk, sk - sq + i + 1)) for i in range(sq))
    else:
        pairs = sq * sk
    return 4.0 * d * hq * b * pairs


def sdpa(q, k, v, causal):
    """q (B, S, H, D) layout in, SDPA on (B, H, S, D) views; GQA by enable_gqa."""
    hq, hkv = q.shape[2], k.shape[2]
    out = F.scaled_dot_product_attention(
        q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2),
        is_causal=causal and q.shape[1] > 1, enable_gqa=hq != hkv)
    return out.transpose(1, 2)


def cpu_flags():
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("flags"):
                    have = set(line.split(":")[1].split())
                    return [x for x in ("avx2", "avx512f", "avx512_bf16", "avx512_fp16",
                                        "amx_bf16", "amx_fp16") if x in have]
    except OSError:
        pass
    return []


def cpu_model():
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return "unknown"


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--lib", required=True, help="path to libattn_c.so")
    parser.add_argument("--kernel", default="cpu_flash")
    parser.add_argument("--threads", type=int, default=len(os.sched_getaffinity(0)),
                        help="torch's threads (the kernel's pool takes the affinity mask)")
    parser.add_argument("--dtypes", default="bf16,fp16")
    parser.add_argument("--warmup", type=int, default=2)
    parser.add_argument("--iters", type=int, default=7)
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    lib = AttnLib(args.lib)
    print(f"CPU: {cpu_model()}; {len(os.sched_getaffinity(0))} cores in the affinity mask; "
          f"flags {' '.join(cpu_flags())}; torch {torch.__version__} "
          f"({torch.get_num_threads()} threads, capability "
          f"{torch.backends.cpu.get_cpu_capability()})")
    a = torch.randn(4096, 4096)
    b = torch.randn(4096, 4096)
    sgemm = 2 * 4096 ** 3 / median_seconds(lambda: torch.mm(a, b), 1, 5) / 1e9
    print(f"fp32 GEMM (torch.mm 4096^3): {sgemm:.0f} GFLOP/s\n")
    print(f"| row | dtype | {args.kernel} GFLOP/s | torch SDPA same dtype | torch SDPA fp32 | "
          f"{args.kernel} / torch | {args.kernel} / sgemm | rel. L2 vs float64 |")
    print("|---|---|---|---|---|---|---|---|")
    failed = False
    for name, bsz, sq, sk, hq, hkv, d, causal in ROWS:
        work = flops(bsz, sq, sk, hq, d, causal)
        for dtype_name in args.dtypes.split(","):
            dtype, code = DTYPES[dtype_name]
            q = torch.randn(bsz, sq, hq, d).to(dtype)
            k = torch.randn(bsz, sk, hkv, d).to(dtype)
            v = torch.randn(bsz, sk, hkv, d).to(dtype)
            out = torch.full_like(q, float("nan"))
            run = lambda: lib.forward_ex(args.kernel, code, q, k, v, out, causal=causal)
            run()
            ref = sdpa(q.double(), k.double(), v.double(), causal)
            err = ((out.double() - ref).norm() / ref.norm()).item()
            ok = err < TOLERANCE[dtype_name]
            failed |= not ok
            ours = work / median_seconds(run, args.warmup, args.iters) / 1e9
            same = work / median_seconds(lambda: sdpa(q, k, v, causal), args.warmup,
                                         args.iters) / 1e9
            qf, kf, vf = q.float(), k.float(), v.float()
            fp32 = work / median_seconds(lambda: sdpa(qf, kf, vf, causal), args.warmup,
                                         args.iters) / 1e9
            print(f"| {name} | {dtype_name} | {ours:.0f} | {same:.0f} | {fp32:.0f} | "
                  f"{ours / same:.2f}x | {ours / sgemm:.2f} | {err:.1e}{'' if ok else ' FAILED'} |",
                  flush=True)
    if failed:
        raise SystemExit("cpu_table.py: an output was over tolerance against float64")


if __name__ == "__main__":
    main()
