#!/usr/bin/env python3
"""The issue-11 table from one run_throughput_suite.sh output folder.

Reads attn_loadgen's CSVs (<tag>_<mode>_<B>x<S>x<H>x<D>.csv, or
<tag>_w<window>c<level>_<mode>_<shape>.csv for one window of one level;
mode one of transport_only, cuda, cuda_batched, peer) and the Python
client's reports (<tag>_w<window>c<level>_python_<shape>.txt, or
<tag>_cuda_<shape>_python.txt from runs before 2026-12-02's seventh, one
report for all levels), and prints per tag a Markdown table of
requests/s (transport ceiling, attnserve, its share of the ceiling, the
Python client, its share of attn_loadgen, the peer, attnserve over the
peer), each point the median of its windows, then every window's numbers,
then each of the issue's bars as met or not met, with the numbers that
decide it. Standard library only.

  throughput_table.py <suite output folder>
"""

import csv
import os
import re
import statistics
import sys

CSV_NAME = re.compile(r"^(?P<tag>.+?)(?:_w(?P<window>\d+)c\d+)?_(?P<mode>transport_only|cuda_batched|cuda|peer)_(?P<shape>\d+(?:x\d+){3})\.csv$")
PYTHON_NAME = re.compile(r"^(?P<tag>.+?)(?:_w(?P<window>\d+)c\d+_python_(?P<shape>\d+(?:x\d+){3})"
                         r"|_cuda_(?P<old_shape>\d+(?:x\d+){3})_python)\.txt$")
PYTHON_ROW = re.compile(r"^\s*(?P<c>\d+)\s+(?P<rps>[0-9.]+)\s")

# The bars of issue 11's "Done when".
CEILING_SHARE = 0.90  # attnserve / transport ceiling at c=32
BIG_SEQ = 4096        # the shape with absolute bars
BIG_C32_RPS = 150.0
BIG_C1_RPS = 30.0
PEER_RATIO_LOADED = 5.0  # at c >= 8
PEER_RATIO_C1 = 2.0
PYTHON_SHARE = 0.80
BATCH_SEQ = 512       # batching's bar: this shape at c=32
BATCH_GAIN = 3.0


def read_runs(folder):
    """{tag: {shape: {source: {concurrency: [requests/s of each window]}}}},
    source one of transport_only, cuda, cuda_batched, peer, python; windows
    in the order of their number."""

    def window_of(name):
        match = CSV_NAME.match(name) or PYTHON_NAME.match(name)
        return int(match["window"] or 0) if match else 0

    runs = {}
    for name in sorted(os.listdir(folder), key=lambda name: (window_of(name), name)):
        path = os.path.join(folder, name)
        match = CSV_NAME.match(name)
        if match:
            table = runs.setdefault(match["tag"], {}).setdefault(match["shape"], {})
            points = table.setdefault(match["mode"], {})
            with open(path, newline="") as f:
                for row in csv.DictReader(f):
                    points.setdefault(int(row["concurrency"]), []).append(
                        float(row["throughput_rps"]))
            continue
        match = PYTHON_NAME.match(name)
        if match:
            shape = match["shape"] or match["old_shape"]
            table = runs.setdefault(match["tag"], {}).setdefault(shape, {})
            points = table.setdefault("python", {})
            with open(path) as f:
                for line in f:
                    row = PYTHON_ROW.match(line)
                    if row:
                        points.setdefault(int(row["c"]), []).append(float(row["rps"]))
    return runs


def medians(shapes):
    """The same tree with each point's windows replaced by their median."""
    return {shape: {source: {c: statistics.median(values) for c, values in points.items()}
                    for source, points in sources.items()}
            for shape, sources in shapes.items()}


def spread(shapes):
    """Lines listing each window of every point measured more than once, and
    attnserve's share of the ceiling window by window."""
    lines = []
    for shape in sorted(shapes, key=lambda s: -int(s.split("x")[1])):
        sources = shapes[shape]
        seq = shape.split("x")[1]
        for c in sorted({c for points in sources.values() for c in points}):
            windows = {source: points[c] for source, points in sources.items()
                       if len(points.get(c, [])) > 1}
            if not windows:
                continue
            parts = [f"{source} " + " / ".join(f"{v:.1f}" for v in values)
                     for source, values in sorted(windows.items())]
            pairs = zip(windows.get("cuda", []), windows.get("transport_only", []))
            shares = [ratio(cuda, ceiling) for cuda, ceiling in pairs]
            if shares:
                parts.append("share " + " / ".join(fmt(share, "share") for share in shares))
            lines.append(f"- S={seq}, c={c}: " + "; ".join(parts))
    return lines


def ratio(a, b):
    return a / b if a is not None and b else None


def fmt(value, kind):
    if value is None:
        return "—"
    if kind == "rps":
        return f"{value:.1f}"
    if kind == "share":
        return f"{100 * value:.0f} %"
    return f"{value:.1f}×"


def table(tag, shapes):
    lines = [f"### {tag}", "",
             "| S | c | transport ceiling | attnserve | % of ceiling | Python client | "
             "Python / loadgen | peer | attnserve / peer |",
             "|---|---|---|---|---|---|---|---|---|"]
    for shape in sorted(shapes, key=lambda s: -int(s.split("x")[1])):
        sources = shapes[shape]
        seq = shape.split("x")[1]
        levels = sorted({c for points in sources.values() for c in points})
        for c in levels:
            get = lambda source: sources.get(source, {}).get(c)
            cuda = get("cuda")
            lines.append(
                f"| {seq} | {c} | {fmt(get('transport_only'), 'rps')} | {fmt(cuda, 'rps')} | "
                f"{fmt(ratio(cuda, get('transport_only')), 'share')} | {fmt(get('python'), 'rps')} | "
                f"{fmt(ratio(get('python'), cuda), 'share')} | {fmt(get('peer'), 'rps')} | "
                f"{fmt(ratio(cuda, get('peer')), 'times')} |")
    return lines


def batching(shapes):
    """A table of the batched server against the unbatched one and the
    ceiling, when the batched one was measured."""
    lines = []
    for shape in sorted(shapes, key=lambda s: -int(s.split("x")[1])):
        sources = shapes[shape]
        batched = sources.get("cuda_batched", {})
        for c in sorted(batched):
            cuda = sources.get("cuda", {}).get(c)
            lines.append(
                f"| {shape.split('x')[1]} | {c} | {fmt(sources.get('transport_only', {}).get(c), 'rps')} | "
                f"{fmt(cuda, 'rps')} | {fmt(batched[c], 'rps')} | {fmt(ratio(batched[c], cuda), 'times')} |")
    if not lines:
        return []
    return ["| S | c | transport ceiling | unbatched | batched | batched / unbatched |",
            "|---|---|---|---|---|---|"] + lines


def bars(shapes):
    """(description, met: True/False/None when not measured, numbers)."""
    out = []

    def check(what, met, numbers):
        out.append((what, met, numbers))

    for shape in sorted(shapes, key=lambda s: -int(s.split("x")[1])):
        sources = shapes[shape]
        seq = int(shape.split("x")[1])
        cuda = sources.get("cuda", {})
        ceiling = sources.get("transport_only", {})
        peer = sources.get("peer", {})
        python = sources.get("python", {})
        share = ratio(cuda.get(32), ceiling.get(32))
        check(f"S={seq}: c=32 at >= {CEILING_SHARE:.0%} of the transport ceiling",
              None if share is None else share >= CEILING_SHARE, fmt(share, "share"))
        if seq == BIG_SEQ:
            for c, floor in ((32, BIG_C32_RPS), (1, BIG_C1_RPS)):
                value = cuda.get(c)
                check(f"S={seq}: c={c} >= {floor:.0f} requests/s",
                      None if value is None else value >= floor, fmt(value, "rps"))
        for c in sorted(cuda):
            floor = PEER_RATIO_C1 if c == 1 else PEER_RATIO_LOADED if c >= 8 else None
            times = ratio(cuda.get(c), peer.get(c))
            if floor is not None:
                check(f"S={seq}: c={c} >= {floor:.0f}x the peer",
                      None if times is None else times >= floor, fmt(times, "times"))
            share_py = ratio(python.get(c), cuda.get(c))
            check(f"S={seq}: c={c} Python client >= {PYTHON_SHARE:.0%} of attn_loadgen",
                  None if share_py is None else share_py >= PYTHON_SHARE, fmt(share_py, "share"))
        if 8 in cuda and 64 in cuda:
            check(f"S={seq}: c=64 >= c=8", cuda[64] >= cuda[8],
                  f"{cuda[64]:.1f} against {cuda[8]:.1f}")
        if seq == BATCH_SEQ:
            # Met by the gain, or shown bounded: the transport alone cannot
            # carry the gain's throughput.
            batched, unbatched, top = (sources.get("cuda_batched", {}).get(32), cuda.get(32),
                                       ceiling.get(32))
            gain = ratio(batched, unbatched)
            what = (f"S={seq}: c=32 batching >= {BATCH_GAIN:.0f}x unbatched, "
                    "or the transport ceiling below that")
            if gain is None:
                check(what, None, "—")
            elif gain >= BATCH_GAIN:
                check(what, True, fmt(gain, "times"))
            elif top is not None:
                bounded = top < BATCH_GAIN * unbatched
                check(what, bounded,
                      f"{fmt(gain, 'times')}; {BATCH_GAIN:.0f}x unbatched = "
                      f"{BATCH_GAIN * unbatched:.1f} {'>' if bounded else '<='} ceiling {top:.1f}")
            else:
                check(what, False, fmt(gain, "times"))
    return out


def main(argv):
    if len(argv) != 2 or not os.path.isdir(argv[1]):
        print(__doc__.strip(), file=sys.stderr)
        return 2
    runs = read_runs(argv[1])
    if not runs:
        print(f"throughput_table.py: no loadgen CSVs in {argv[1]}", file=sys.stderr)
        return 1
    for tag, windows in sorted(runs.items()):
        shapes = medians(windows)
        print("\n".join(table(tag, shapes)))
        print()
        lines = batching(shapes)
        if lines:
            print("Batching (`--batch_delay_us`):")
            print()
            print("\n".join(lines))
            print()
        lines = spread(windows)
        if lines:
            print("Each point above is the median of its windows (requests/s, in the order run):")
            print("\n".join(lines))
            print()
        for what, met, numbers in bars(shapes):
            verdict = "not measured" if met is None else "met" if met else "NOT MET"
            print(f"- {what}: {verdict} ({numbers})")
        print()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
