#!/usr/bin/env python3
"""The decode table (issue 31): flash_fwd on few query rows against PyTorch's
FA2 (SDPA FLASH backend) and cuDNN on the same tensors, one process.

Rows (GQA 32 query / 8 KV heads, d=128):
  i   dense decode B=64, Sq=1, Sk=8192
  j   dense decode B=8, Sq=1, Sk=32768
  j2  dense decode B=1, Sq=1, Sk=131072 (one long sequence)
  k   speculative decode B=32, Sq=4, Sk=4096, causal (bottom right)
  p   rows i and j with paged K/V (page 16 and 64, pages in random order),
      through attn_forward_kvcache: bar ≥ 0.95× the dense kernel's bandwidth;
      row i also at page 1, 32 and 256 (the bar printed beside them too)
  a   row i's cache (dense, and paged 16) with 1 token per sequence appended
      into it (k_new/v_new at cache_seqlens = Sk − 1) and attended in the same
      call: bar ≤ 1.05× row i's dense time
Columns: flash_fwd without a workspace (GQA-packed rows, no split),
flash_fwd with one (its own split count), FA2, cuDNN: median µs of CUDA
events and the K+V read rate (K and V bytes / time). The physical bound is
a device-to-device copy of the row's K (read + write bytes / time) in the
same run. Each flash_fwd output is checked against a float32 reference
before it is timed.

  python3 bench/decode_table.py --lib build/kernels/libattn_c.so --out /tmp/decode
"""
import argparse
import datetime
import json
import os

import torch
import torch.nn.functional as F
from torch.nn.attention import SDPBackend, sdpa_kernel

from attnlib import DTYPES, AttnLib, git_commit, rel_err, sdpa_fn, time_ms

ROWS = [  # name, batch, seqlen_q, seqlen_k, causal
    ("i", 64, 1, 8192, False),
    ("j", 8, 1, 32768, False),
    ("j2", 1, 1, 131072, False),
    ("k", 32, 4, 4096, True),
]
HQ, HKV, D = 32, 8, 128
WORKSPACE_BYTES = 64 << 20
COLUMNS = ["flash_fwd (packed)", "flash_fwd (split)", "FA2 (SDPA flash)", "cuDNN (SDPA cudnn)"]


def reference(q, k, v, causal):
    qt, kt, vt = (x.transpose(1, 2).float() for x in (q, k, v))
    kt, vt = (x.repeat_interleave(HQ // HKV, dim=1) for x in (kt, vt))
    sq, sk = q.shape[1], k.shape[1]
    mask = None
    if causal:  # bottom right: key j visible to query i iff j <= i + sk - sq
        i = torch.arange(sq, device="cuda")[:, None]
        j = torch.arange(sk, device="cuda")[None, :]
        mask = j <= i + sk - sq
    return torch.nn.functional.scaled_dot_product_attention(qt, kt, vt, attn_mask=mask).transpose(1, 2)


def sdpa_masked_fn(backend, q, k, v):
    qt, kt, vt = (x.transpose(1, 2) for x in (q, k, v))
    sq, sk = q.shape[1], k.shape[1]
    i = torch.arange(sq, device="cuda")[:, None]
    j = torch.arange(sk, device="cuda")[None, :]
    mask = (j <= i + sk - sq)[None, None]

    def run():
        with sdpa_kernel(backend):
            return F.scaled_dot_product_attention(qt, kt, vt, attn_mask=mask, enable_gqa=True)
    return run


def copy_bandwidth(nbytes, warmup, iters):
    src = torch.empty(nbytes // 2, dtype=torch.bfloat16, device="cuda")
    dst = torch.empty_like(src)
    ms = time_ms(lambda: dst.copy_(src), warmup, iters)
    return 2 * nbytes / ms / 1e9  # TB/s, read + write


def run_row(lib, code, dtype, row, warmup, iters):
    name, b, sq, sk, causal = row
    q = torch.randn(b, sq, HQ, D, dtype=dtype, device="cuda")
    k, v = (torch.randn(b, sk, HKV, D, dtype=dtype, device="cuda") for _ in range(2))
    kv_bytes = 2 * k.numel() * k.element_size()
    ref = reference(q, k, v, causal)
    workspace = torch.empty(WORKSPACE_BYTES, dtype=torch.uint8, device="cuda")
    us, errs, notes = {}, {}, []
    for column, ws in (("flash_fwd (packed)", None), ("flash_fwd (split)", workspace)):
        out = torch.full_like(q, float("nan"))
        fn = lambda: lib.forward_ex("flash_fwd", code, q, k, v, out, causal=causal, workspace=ws)
        fn()
        torch.cuda.synchronize()
        errs[column] = rel_err(out, ref)
        us[column] = 1000 * time_ms(fn, warmup, iters)
    for column, backend in (("FA2 (SDPA flash)", SDPBackend.FLASH_ATTENTION),
                            ("cuDNN (SDPA cudnn)", SDPBackend.CUDNN_ATTENTION)):
        # SDPA's is_causal is top-left when Sq != Sk: the bottom-right mask
        # goes in as a boolean attn_mask instead (FA2's SDPA path refuses it).
        fn = sdpa_masked_fn(backend, q, k, v) if causal and sq != sk else sdpa_fn(backend, q, k, v, causal)
        try:
            fn()
        except RuntimeError as e:
            notes.append(f"{column} refused: {str(e).splitlines()[0][:80]}")
            continue
        us[column] = 1000 * time_ms(fn, warmup, iters)
    bound = copy_bandwidth(k.numel() * k.element_size(), warmup, iters)
    return {"row": name, "batch": b, "seqlen_q": sq, "seqlen_k": sk, "causal": causal,
            "kv_bytes": kv_bytes, "us": us, "rel_err": errs, "copy_tbs": bound, "notes": notes}


CACHE_ROWS = [  # name, base row, page size (0: dense cache), append
    ("p", "i", 16, False), ("p", "i", 64, False),
    ("p", "j", 16, False), ("p", "j", 64, False),
    ("p", "i", 1, False), ("p", "i", 32, False), ("p", "i", 256, False),
    ("a", "i", 0, True), ("a", "i", 16, True),
]


def paged(k, page, perm):
    """K (B, Sk, Hkv, D) as a page pool in `perm`'s order and its block table."""
    b, sk = k.shape[:2]
    pages = k.reshape(b * sk // page, page, *k.shape[2:])
    pool = torch.empty_like(pages)
    pool[perm] = pages
    return pool, perm.reshape(b, sk // page).to(torch.int32)


def run_cache_row(lib, code, dtype, row, dense_us, warmup, iters):
    """One row of CACHE_ROWS: flash_fwd through attn_forward_kvcache, checked
    against the float32 reference on the dense tensors, timed, beside the
    dense kernel's time on the same shape (`dense_us`)."""
    name, base, page, append = row
    _, b, sq, sk, causal = next(r for r in ROWS if r[0] == base)
    q = torch.randn(b, sq, HQ, D, dtype=dtype, device="cuda")
    k, v = (torch.randn(b, sk, HKV, D, dtype=dtype, device="cuda") for _ in range(2))
    kv_bytes = 2 * k.numel() * k.element_size()
    ref = reference(q, k, v, causal)
    lengths = torch.full((b,), sk - 1 if append else sk, dtype=torch.int32, device="cuda")
    k_new = v_new = None
    k_cache, v_cache = k.clone(), v.clone()
    if append:  # the last token comes in the call; the cache's row is stale
        k_new, v_new = k[:, -1:].contiguous(), v[:, -1:].contiguous()
        k_cache[:, -1].normal_()
        v_cache[:, -1].normal_()
    table = None
    if page:
        perm = torch.randperm(b * sk // page, device="cuda")
        k_cache, table = paged(k_cache, page, perm)
        v_cache, _ = paged(v_cache, page, perm)
    workspace = torch.empty(WORKSPACE_BYTES, dtype=torch.uint8, device="cuda")
    out = torch.full_like(q, float("nan"))
    fn = lib.forward_kvcache("flash_fwd", code, q, out, k_cache, v_cache, lengths, table,
                             k_new, v_new, causal=causal, workspace=workspace)
    fn()
    torch.cuda.synchronize()
    err = rel_err(out, ref)
    us = 1000 * time_ms(fn, warmup, iters)
    return {"row": name, "base": base, "page_size": page, "append": append, "batch": b,
            "seqlen_q": sq, "seqlen_k": sk, "kv_bytes": kv_bytes, "us": us,
            "dense_us": dense_us, "rel_err": err}


def cache_table(results):
    lines = ["| row | shape | cache | flash_fwd µs (TB/s) | dense flash_fwd µs (TB/s) | "
             "bandwidth vs dense | time vs dense | bar | max rel err |", "|---" * 9 + "|"]
    for r in results:
        shape = f"{r['base']}: B={r['batch']} Sq={r['seqlen_q']} Sk={r['seqlen_k']}"
        cache = (f"paged {r['page_size']}, random order" if r["page_size"] else "dense") + (
            ", append 1" if r["append"] else "")
        rate = lambda t: f"{t:.1f} ({r['kv_bytes'] / t / 1e6:.2f})"
        ratio = r["us"] / r["dense_us"]
        bar = "≤ 1.05× time" if r["append"] else "≥ 0.95× bandwidth"
        met = ratio <= 1.05 if r["append"] else 1 / ratio >= 0.95
        lines.append(f"| {r['row']} | {shape} | {cache} | {rate(r['us'])} | {rate(r['dense_us'])} | "
                     f"{1 / ratio:.2f}× | {ratio:.2f}× | {bar}: {'met' if met else 'NOT met'} | "
                     f"{r['rel_err']:.1e} |")
    return lines


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--lib", required=True)
    ap.add_argument("--out", required=True)
    ap.add_argument("--dtypes", default="bf16,fp16")
    ap.add_argument("--warmup", type=int, default=10)
    ap.add_argument("--iters", type=int, default=50)
    args = ap.parse_args()
    os.makedirs(args.out, exist_ok=True)
    lib = AttnLib(args.lib)
    results, lines = [], []
    head = (f"GPU {torch.cuda.get_device_name()}; torch {torch.__version__}; commit {git_commit()}; "
            f"{datetime.date.today()}; GQA {HQ}/{HKV}, d={D}; median of {args.iters} launches (CUDA events)")
    lines += [head, ""]
    for dname in args.dtypes.split(","):
        dtype, code = DTYPES[dname]
        lines += [f"### {dname}", "",
                  "| row | shape | " + " | ".join(f"{c} µs (TB/s)" for c in COLUMNS)
                  + " | split / cuDNN | copy TB/s | max rel err |",
                  "|---" * (len(COLUMNS) + 5) + "|"]
        for row in ROWS:
            r = run_row(lib, code, dtype, row, args.warmup, args.iters)
            r["dtype"] = dname
            results.append(r)
            cells = []
            for c in COLUMNS:
                t = r["us"].get(c)
                cells.append("—" if t is None else f"{t:.1f} ({r['kv_bytes'] / t / 1e6:.2f})")
            cud = r["us"].get("cuDNN (SDPA cudnn)")
            ratio = "—" if cud is None else f"{cud / r['us']['flash_fwd (split)']:.2f}×"
            shape = f"B={r['batch']} Sq={r['seqlen_q']} Sk={r['seqlen_k']}" + (" causal" if r["causal"] else "")
            lines.append(f"| {r['row']} | {shape} | " + " | ".join(cells)
                         + f" | {ratio} | {r['copy_tbs']:.2f} | {max(r['rel_err'].values()):.1e} |")
            for n in r["notes"]:
                lines.append(f"<!-- {n} -->")
        lines.append("")
        dense = {r["row"]: r["us"]["flash_fwd (split)"] for r in results if r["dtype"] == dname}
        cache_results = []
        for row in CACHE_ROWS:
            c = run_cache_row(lib, code, dtype, row, dense[row[1]], args.warmup, args.iters)
            c["dtype"] = dname
            cache_results.append(c)
        results += cache_results
        lines += [f"#### {dname}: paged K/V and append (attn_forward_kvcache)", ""]
        lines += cache_table(cache_results) + [""]
    text = "\n".join(lines)
    print(text)
    with open(os.path.join(args.out, "decode.md"), "w") as f:
        f.write(text + "\n")
    with open(os.path.join(args.out, "decode.json"), "w") as f:
        json.dump(results, f, indent=1)


if __name__ == "__main__":
    main()
