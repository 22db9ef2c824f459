#!/usr/bin/env python3
"""Reproduces the seed's ladder table on a GPU host with PyTorch.

Times every ladder kernel of libattn_c.so (through ctypes, on PyTorch's
tensors and stream) and PyTorch's scaled_dot_product_attention with the
FLASH backend (FlashAttention-2, the reference) and the CUDNN backend, in
one process on the same tensors: B*S = --tokens, --heads heads, d = 128,
non-causal, for each sequence length and dtype. Prints, per dtype, each
kernel's TFLOP/s, its performance relative to FA2 at S = 4096, and the
harmonic mean of that ratio over all lengths (the seed's table); writes
results.json, table.md and a PNG plot of TFLOP/s against S to --out.

Timing: CUDA events around each launch, median of --iters launches after
--warmup; a short device-side sleep before each timed launch keeps host
launch latency (ctypes or PyTorch dispatch) out of the measurement.

  python3 bench/ladder_table.py --lib build/kernels/libattn_c.so --out /tmp/ladder
"""
import argparse
import datetime
import json
import os
import sys

import torch
from torch.nn.attention import SDPBackend

from attnlib import DTYPES, AttnLib, git_commit, hmean, rel_err, sdpa_fn, time_ms

HEAD_DIM = 128


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--lib", required=True, help="path to libattn_c.so")
    parser.add_argument("--out", default=".", help="directory for results.json, table.md, plot")
    parser.add_argument("--kernels", default="ladder", help="'ladder' or comma-separated names")
    parser.add_argument("--dtypes", default="bf16,fp16")
    parser.add_argument("--seq-lens", default="512,1024,2048,4096,8192,16384")
    parser.add_argument("--tokens", type=int, default=16384)
    parser.add_argument("--heads", type=int, default=16)
    parser.add_argument("--warmup", type=int, default=10)
    parser.add_argument("--iters", type=int, default=50)
    args = parser.parse_args()

    lib = AttnLib(args.lib)
    kernels = ([k for k in lib.kernels() if k != "cpu_reference"]
               if args.kernels == "ladder" else args.kernels.split(","))
    seq_lens = [int(s) for s in args.seq_lens.split(",")]
    refs = {"FA2 (SDPA flash)": SDPBackend.FLASH_ATTENTION,
            "cuDNN (SDPA cudnn)": SDPBackend.CUDNN_ATTENTION}
    gpu = torch.cuda.get_device_name()
    results = {"date": datetime.date.today().isoformat(), "gpu": gpu, "commit": git_commit(),
               "torch": torch.__version__, "tokens": args.tokens, "heads": args.heads,
               "head_dim": HEAD_DIM, "iters": args.iters, "tflops": {}, "rel_err": {}}
    os.makedirs(args.out, exist_ok=True)
    print(f"{gpu}, torch {torch.__version__}, commit {results['commit']}", flush=True)

    for dname in args.dtypes.split(","):
        dtype, code = DTYPES[dname]
        tflops = results["tflops"].setdefault(dname, {})
        errs = results["rel_err"].setdefault(dname, {})
        for s in seq_lens:
            b = max(1, args.tokens // s)
            torch.manual_seed(s)
            q, k, v = (torch.randn(b, s, args.heads, HEAD_DIM, dtype=dtype, device="cuda")
                       for _ in range(3))
            flops = 4.0 * b * args.heads * s * s * HEAD_DIM
            reference = sdpa_fn(SDPBackend.FLASH_ATTENTION, q, k, v)().transpose(1, 2)
            for name, backend in refs.items():
                ms = time_ms(sdpa_fn(backend, q, k, v), args.warmup, args.iters)
                tflops.setdefault(name, {})[s] = flops / ms / 1e9
            for name in kernels:
                out = torch.full_like(q, float("nan"))
                lib.forward(name, code, q, k, v, out)
                torch.cuda.synchronize()
                errs.setdefault(name, {})[s] = rel_err(out, reference)
                ms = time_ms(lambda: lib.forward(name, code, q, k, v, out),
                             args.warmup, args.iters)
                tflops.setdefault(name, {})[s] = flops / ms / 1e9
            print(f"{dname} S={s:5d} B={b:2d}: " + ", ".join(
                f"{n.split(' ')[0]} {tflops[n][s]:.0f}" for n in list(refs) + kernels), flush=True)

    lines = [f"GPU {gpu}; torch {torch.__version__}; commit {results['commit']}; "
             f"{results['date']}; B*S={args.tokens}, H={args.heads}, d={HEAD_DIM}, non-causal; "
             f"median of {args.iters} launches (CUDA events)", ""]
    for dname, tflops in results["tflops"].items():
        fa2 = tflops["FA2 (SDPA flash)"]
        lines += [f"### {dname}", "",
                  "| kernel | TFLOP/s @4096 | vs FA2 @4096 | vs FA2 hmean | TFLOP/s hmean | max rel err |",
                  "|---|---|---|---|---|---|"]
        for name, per_s in tflops.items():
            ratios = [per_s[s] / fa2[s] for s in seq_lens]
            at = per_s.get(4096, float("nan"))
            err = max(results["rel_err"][dname].get(name, {0: 0}).values())
            lines.append(f"| {name} | {at:.1f} | {at / fa2.get(4096, float('nan')):.1%} | "
                         f"{hmean(ratios):.1%} | {hmean(list(per_s.values())):.1f} | "
                         f"{err:.1e} |")
        lines.append("")
    table = "\n".join(lines)
    print("\n" + table)
    with open(os.path.join(args.out, "table.md"), "w") as f:
        f.write(table + "\n")
    with open(os.path.join(args.out, "results.json"), "w") as f:
        json.dump(results, f, indent=1)

    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        print("matplotlib missing: no plot", file=sys.stderr)
        return
    fig, axes = plt.subplots(1, len(results["tflops"]), figsize=(7 * len(results["tflops"]), 5),
                             squeeze=False)
    for ax, (dname, tflops) in zip(axes[0], results["tflops"].items()):
        for name, per_s in tflops.items():
            style = "--" if "SDPA" in name else "-"
            ax.plot(seq_lens, [per_s[s] for s in seq_lens], style, marker="o", label=name)
        ax.set_xscale("log", base=2)
        ax.set_xlabel("sequence length (B*S = %d, H = %d, d = 128)" % (args.tokens, args.heads))
        ax.set_ylabel("TFLOP/s")
        ax.set_title(f"{gpu}, {dname}")
        ax.grid(True, alpha=0.3)
        ax.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(os.path.join(args.out, "ladder.png"), dpi=120)
    print(f"wrote {args.out}/table.md, results.json, ladder.png")


if __name__ == "__main__":
    main()
