#!/usr/bin/env python3
"""The kernel-breadth table: the production kernel (flash_fwd) against
PyTorch's FA2 (SDPA FLASH backend) and cuDNN on the same tensors, one process.

Rows (total tokens --tokens, bf16 and fp16):
  a  non-causal, d=128, S=4096, H=16 (also k07_autotuned: flash_fwd must not
     be slower than the ladder's step 7 here)
  b  causal, d=128, S=4096, H=16
  c  non-causal, d=64, S=4096, H=16
  d  non-causal, d=256, S=4096, H=16
  e  GQA 32 query / 8 KV heads, causal, d=128, S=4096
  f  ragged S=4000, non-causal, d=128, H=16
  h  non-causal, d=96, S=4096, H=16 (issue 33's d=96 bar: ≥ 1.0× FA2)
  hc causal, d=96, S=4096, H=16
  i  non-causal, d=192, S=4096, H=16
  g  varlen: mixed lengths packed (flash_fwd with cu_seqlens) against FA2's
     own varlen kernel (torch.ops.aten._flash_attention_forward with
     cumulative lengths) where this PyTorch has it, else against FA2 and
     cuDNN on the zero-padded batch (the table says which)
TFLOP/s count the visible query-key pairs (causal halves them), the same
count for every column of a row. Each flash_fwd output is checked against
the FA2 output (relative L2 error) before it is timed. --also names more
kernels timed on the dense rows beside flash_fwd, e.g. flash_fwd@ampere for
the Ampere family where flash_fwd runs the hopper one (checked the same way;
in the reference column, and their error in the notes).

  python3 bench/breadth_table.py --lib build/kernels/libattn_c.so --out /tmp/breadth
"""
import argparse
import datetime
import json
import os

import torch
from torch.nn.attention import SDPBackend

from attnlib import DTYPES, AttnLib, git_commit, rel_err, sdpa_fn, time_ms

FA2 = "FA2 (SDPA flash)"
CUDNN = "cuDNN (SDPA cudnn)"
VARLEN_LENGTHS = [3000, 1000, 100, 2048, 4096, 1, 777, 2500, 1234, 1624]  # sum 16380


def visible_pairs(sq, sk, causal):
    if not causal:
        return sq * sk
    return sum(max(0, min(sk, i + sk - sq + 1)) for i in range(sq))


def dense_row(lib, code, dtype, tokens, seq, hq, hkv, d, causal, kernels, warmup, iters):
    b = max(1, tokens // seq)
    q = torch.randn(b, seq, hq, d, dtype=dtype, device="cuda")
    k, v = (torch.randn(b, seq, hkv, d, dtype=dtype, device="cuda") for _ in range(2))
    flops = 4.0 * d * hq * b * visible_pairs(seq, seq, causal)
    tflops, errs, notes = {}, {}, []
    reference = None
    for name, backend in ((FA2, SDPBackend.FLASH_ATTENTION), (CUDNN, SDPBackend.CUDNN_ATTENTION)):
        fn = sdpa_fn(backend, q, k, v, causal)
        try:
            out = fn()
        except RuntimeError as e:
            notes.append(f"{name} refused: {str(e).splitlines()[0][:80]}")
            continue
        if reference is None:
            reference = out.transpose(1, 2)
        tflops[name] = flops / time_ms(fn, warmup, iters) / 1e9
    if reference is None:  # no SDPA backend took it: math reference in float32
        qt, kt, vt = (x.transpose(1, 2).float() for x in (q, k, v))
        if hkv != hq:
            kt, vt = (x.repeat_interleave(hq // hkv, dim=1) for x in (kt, vt))
        reference = torch.nn.functional.scaled_dot_product_attention(
            qt, kt, vt, is_causal=causal).transpose(1, 2)
    for name in kernels:
        out = torch.full_like(q, float("nan"))
        try:
            lib.forward_ex(name, code, q, k, v, out, causal=causal)
        except RuntimeError as e:
            notes.append(f"{name} refused: {e}")
            continue
        torch.cuda.synchronize()
        errs[name] = rel_err(out, reference)
        tflops[name] = flops / time_ms(
            lambda: lib.forward_ex(name, code, q, k, v, out, causal=causal), warmup, iters) / 1e9
    return tflops, errs, notes


def varlen_row(lib, code, dtype, hq, d, warmup, iters):
    lengths = VARLEN_LENGTHS
    total, longest, n = sum(lengths), max(lengths), len(lengths)
    cu = torch.tensor([0] + list(torch.tensor(lengths).cumsum(0)), dtype=torch.int32,
                      device="cuda")
    q, k, v = (torch.randn(total, hq, d, dtype=dtype, device="cuda") for _ in range(3))
    flops = 4.0 * d * hq * sum(s * s for s in lengths)
    tflops, errs, notes = {}, {}, []
    out = torch.full_like(q, float("nan"))
    run = lambda: lib.forward_ex("flash_fwd", code, q, k, v, out, cu_seqlens_q=cu,  # noqa: E731
                                 cu_seqlens_k=cu, max_seqlen_q=longest, max_seqlen_k=longest)
    run()
    torch.cuda.synchronize()
    # Reference: each sequence through SDPA FLASH on its own.
    ref = torch.empty_like(q)
    starts = cu.tolist()
    for i in range(n):
        s, e = starts[i], starts[i + 1]
        ref[s:e] = sdpa_fn(SDPBackend.FLASH_ATTENTION, *(x[s:e].unsqueeze(0) for x in (q, k, v)))(
            ).transpose(1, 2)[0]
    errs["flash_fwd"] = rel_err(out, ref)
    tflops["flash_fwd"] = flops / time_ms(run, warmup, iters) / 1e9
    varlen_fa2 = getattr(torch.ops.aten, "_flash_attention_forward", None)
    fa2_ok = False
    if varlen_fa2 is not None:
        try:
            fn = lambda: varlen_fa2(q, k, v, cu, cu, longest, longest, 0.0, False, False)  # noqa: E731
            fn()
            tflops[FA2 + " varlen"] = flops / time_ms(fn, warmup, iters) / 1e9
            fa2_ok = True
        except (RuntimeError, TypeError) as e:
            notes.append(f"FA2 varlen op refused: {str(e).splitlines()[0][:100]}")
    if not fa2_ok:
        notes.append("FA2/cuDNN timed on the zero-padded batch")
    padded = [torch.zeros(n, longest, hq, d, dtype=dtype, device="cuda") for _ in range(3)]
    for x, p in zip((q, k, v), padded):
        for i in range(n):
            p[i, :lengths[i]] = x[starts[i]:starts[i + 1]]
    for name, backend in ((FA2 + " padded", SDPBackend.FLASH_ATTENTION),
                          (CUDNN + " padded", SDPBackend.CUDNN_ATTENTION)):
        fn = sdpa_fn(backend, *padded)
        try:
            fn()
        except RuntimeError as e:
            notes.append(f"{name} refused: {str(e).splitlines()[0][:80]}")
            continue
        tflops[name] = flops / time_ms(fn, warmup, iters) / 1e9
    return tflops, errs, notes


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--lib", required=True, help="path to libattn_c.so")
    parser.add_argument("--out", default=".", help="directory for breadth.md and breadth.json")
    parser.add_argument("--dtypes", default="bf16,fp16")
    parser.add_argument("--tokens", type=int, default=16384)
    parser.add_argument("--rows", default="a,b,c,d,e,f,g,h,hc,i")
    parser.add_argument("--warmup", type=int, default=10)
    parser.add_argument("--iters", type=int, default=50)
    parser.add_argument("--also", default="",
                        help="comma-separated kernels timed beside flash_fwd on dense rows")
    args = parser.parse_args()
    also = [name for name in args.also.split(",") if name]

    lib = AttnLib(args.lib)
    def mha(d, causal, kernels=("flash_fwd",)):
        """A row of S=4096, 16 query and KV heads: its title, shape, kernels."""
        title = f"{'causal' if causal else 'non-causal'} d={d} S=4096 H=16"
        return title, dict(seq=4096, hq=16, hkv=16, d=d, causal=causal), list(kernels)

    rows = {
        "a": mha(128, False, kernels=("flash_fwd", "k07_autotuned")),
        "b": mha(128, True),
        "c": mha(64, False),
        "d": mha(256, False),
        "e": ("GQA 32/8 causal d=128 S=4096", dict(seq=4096, hq=32, hkv=8, d=128, causal=True),
              ["flash_fwd"]),
        "f": ("ragged S=4000 d=128 H=16", dict(seq=4000, hq=16, hkv=16, d=128, causal=False),
              ["flash_fwd"]),
        "h": mha(96, False),
        "hc": mha(96, True),
        "i": mha(192, False),
    }
    gpu = torch.cuda.get_device_name()
    results = {"date": datetime.date.today().isoformat(), "gpu": gpu, "commit": git_commit(),
               "torch": torch.__version__, "tokens": args.tokens, "rows": {}}
    os.makedirs(args.out, exist_ok=True)
    lines = [f"GPU {gpu}; torch {torch.__version__}; commit {results['commit']}; "
             f"{results['date']}; total tokens {args.tokens}; median of {args.iters} launches "
             "(CUDA events); TFLOP/s over visible pairs", "",
             "| row | dtype | flash_fwd TFLOP/s | reference TFLOP/s | flash_fwd / FA2 | "
             "flash_fwd / cuDNN | rel err vs FA2 | notes |", "|---|---|---|---|---|---|---|---|"]
    for dname in args.dtypes.split(","):
        dtype, code = DTYPES[dname]
        for row in args.rows.split(","):
            torch.manual_seed(sum(map(ord, row)))  # ord(row) for one letter
            if row == "g":
                title = f"varlen {len(VARLEN_LENGTHS)} seqs 1..4096 d=128 H=16"
                tflops, errs, notes = varlen_row(lib, code, dtype, 16, 128, args.warmup,
                                                 args.iters)
            else:
                title, shape, kernels = rows[row]
                tflops, errs, notes = dense_row(lib, code, dtype, args.tokens,
                                                kernels=kernels + [n for n in also
                                                                   if n not in kernels],
                                                warmup=args.warmup, iters=args.iters, **shape)
            results["rows"].setdefault(row, {})[dname] = {
                "title": title, "tflops": tflops, "rel_err": errs, "notes": notes}
            ours = tflops.get("flash_fwd", float("nan"))
            fa2 = next((v for n, v in tflops.items() if n.startswith(FA2)), float("nan"))
            cudnn = next((v for n, v in tflops.items() if n.startswith(CUDNN)), float("nan"))
            refs = ", ".join(f"{n} {v:.1f}" for n, v in tflops.items() if n != "flash_fwd")
            extra = list(notes)
            extra += [f"{n} rel err {errs[n]:.1e}" for n in also if n in errs]
            if "k07_autotuned" in tflops:
                extra.append(f"flash_fwd / k07_autotuned {ours / tflops['k07_autotuned']:.1%}")
            lines.append(f"| {row}: {title} | {dname} | {ours:.1f} | {refs} | {ours / fa2:.1%} | "
                         f"{ours / cudnn:.1%} | {errs.get('flash_fwd', float('nan')):.1e} | "
                         f"{'; '.join(extra)} |")
            print(lines[-1], flush=True)
    table = "\n".join(lines)
    print("\n" + table)
    with open(os.path.join(args.out, "breadth.md"), "w") as f:
        f.write(table + "\n")
    with open(os.path.join(args.out, "breadth.json"), "w") as f:
        json.dump(results, f, indent=1)


if __name__ == "__main__":
    main()
