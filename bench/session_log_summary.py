#!/usr/bin/env python3
"""Summarizes an attn_server request log's AttendSessions calls.

Groups the calls into decode steps (Sq=1) and prefill chunks (Sq>1) and
prints, per group, the median of each phase the server measured (decode,
queue, h2d, kernel, d2h, total, in microseconds) and the ratio of the
server's total time to its kernel time per call (median of the ratios),
the quantity issue 32's first bar bounds (<= 1.3).

    session_log_summary.py <server log> [--skip N]
--skip drops each group's first N calls (warm-up)."""
import argparse
import re
import statistics
import sys

FIELDS = ("decode_us", "queue_us", "h2d_us", "kernel_us", "d2h_us", "total_us")


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("log")
    parser.add_argument("--skip", type=int, default=0)
    args = parser.parse_args()
    groups = {}
    with open(args.log, encoding="utf-8", errors="replace") as f:
        for line in f:
            if "rpc=AttendSessions" not in line or "status=OK" not in line:
                continue
            shape = re.search(r"\[B=(\d+), Sq=(\d+), Sk=(\d+)", line)
            if shape is None:
                continue
            values = {k: int(v) for k, v in re.findall(r"(\w+_us)=(\d+)", line)}
            if any(k not in values for k in FIELDS):
                continue
            kind = "decode" if shape.group(2) == "1" else "prefill"
            groups.setdefault((kind, int(shape.group(1))), []).append(values)
    if not groups:
        print("no AttendSessions calls in", args.log)
        return 1
    print("| calls | B | n | " + " | ".join(f"{k} (med)" for k in FIELDS) +
          " | total/kernel (med) |")
    print("|---|---|---|" + "---|" * (len(FIELDS) + 1))
    for (kind, batch), calls in sorted(groups.items()):
        calls = calls[args.skip:]
        if not calls:
            continue
        med = {k: statistics.median(c[k] for c in calls) for k in FIELDS}
        ratio = statistics.median(c["total_us"] / max(c["kernel_us"], 1) for c in calls)
        print(f"| {kind} | {batch} | {len(calls)} | " +
              " | ".join(f"{med[k]:.0f}" for k in FIELDS) + f" | {ratio:.2f} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
