#!/usr/bin/env python3
"""bench/throughput_table.py on a made-up suite folder: two tags, both
shapes, a third tag measured in windows (the Python client's too), two more for batching's bar (met by
its gain, not met with a ceiling that would carry it); the table's numbers
and shares,
each point the median of its windows, each bar met or not met as the
numbers decide, a bar with no measurement said so, and a usage error."""

import os
import subprocess
import sys
import tempfile

HEADER = "mode,concurrency,throughput_rps,tensor_gbps\n"
SCRIPT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "bench",
                      "throughput_table.py")


def write_csv(folder, name, points):
    with open(os.path.join(folder, name), "w") as f:
        f.write(HEADER)
        for c, rps in points.items():
            f.write(f"closed_loop,{c},{rps},1.0\n")


def run(*args):
    return subprocess.run([sys.executable, SCRIPT, *args], capture_output=True, text=True)


def expect(condition, what, output):
    if not condition:
        print(f"FAILED: {what}\n--- output ---\n{output}")
        sys.exit(1)


def main():
    with tempfile.TemporaryDirectory() as folder:
        big, small = "1x4096x16x128", "1x512x16x128"
        # Round r1: every bar met at S=4096 except c=64 >= c=8; S=512 short of the ceiling.
        write_csv(folder, f"r1_transport_only_{big}.csv", {1: 100, 8: 200, 32: 250, 64: 260})
        write_csv(folder, f"r1_cuda_{big}.csv", {1: 90, 8: 240, 32: 240, 64: 230})
        write_csv(folder, f"r1_peer_{big}.csv", {1: 15, 8: 12, 32: 10, 64: 8})
        with open(os.path.join(folder, f"r1_cuda_{big}_python.txt"), "w") as f:
            f.write("bench: bf16 [1, 4096, 16, 128], transport native\n"
                    "concurrency  requests/s    GB/s   p50 ms   p99 ms failed\n"
                    "          1       100.0    6.7     9.0    10.0      0\n"
                    "          8        50.0    3.3    36.0    56.0      0\n")
        write_csv(folder, f"r1_transport_only_{small}.csv", {32: 2000})
        write_csv(folder, f"r1_cuda_{small}.csv", {32: 1700})
        # Batching: 1.1x, but 3x unbatched (5100) is beyond the ceiling (2000).
        write_csv(folder, f"r1_cuda_batched_{small}.csv", {32: 1800})
        # Tag b: batching 4x; tag n: 1.5x with a ceiling that would carry 3x.
        write_csv(folder, f"b_cuda_{small}.csv", {32: 100})
        write_csv(folder, f"b_w1c32_cuda_batched_{small}.csv", {32: 400})
        write_csv(folder, f"n_transport_only_{small}.csv", {32: 5000})
        write_csv(folder, f"n_cuda_{small}.csv", {32: 1000})
        write_csv(folder, f"n_cuda_batched_{small}.csv", {32: 1500})
        # Round r2: only the ceiling and attnserve.
        write_csv(folder, f"r2_transport_only_{big}.csv", {32: 300})
        write_csv(folder, f"r2_cuda_{big}.csv", {32: 280})
        # Tag w: three windows of c=32 (medians 300 and 260: 87 %) and one of c=8.
        for window, ceiling, cuda in ((1, 300, 260), (2, 280, 290), (3, 310, 250)):
            write_csv(folder, f"w_w{window}c32_transport_only_{big}.csv", {32: ceiling})
            write_csv(folder, f"w_w{window}c32_cuda_{big}.csv", {32: cuda})
        write_csv(folder, f"w_w1c8_cuda_{big}.csv", {8: 199})
        # ... and the Python client in the same windows (median 240: 92 % of 260).
        for window, rps in ((1, 200.0), (2, 280.0), (3, 240.0)):
            with open(os.path.join(folder, f"w_w{window}c32_python_{big}.txt"), "w") as f:
                f.write("bench: bf16 [1, 4096, 16, 128], transport native\n"
                        "concurrency  requests/s    GB/s   p50 ms   p99 ms failed\n"
                        f"         32       {rps}    6.7     9.0    10.0      0\n")
        # Not the suite's: ignored.
        write_csv(folder, "notes.csv", {1: 1})

        done = run(folder)
        out = done.stdout
        expect(done.returncode == 0, "exit 0", out + done.stderr)
        for line in [
            "### r1", "### r2",
            "| 4096 | 32 | 250.0 | 240.0 | 96 % | — | — | 10.0 | 24.0× |",
            "| 4096 | 1 | 100.0 | 90.0 | 90 % | 100.0 | 111 % | 15.0 | 6.0× |",
            "| 512 | 32 | 2000.0 | 1700.0 | 85 % | — | — | — | — |",
            "- S=4096: c=32 at >= 90% of the transport ceiling: met (96 %)",
            "- S=4096: c=32 >= 150 requests/s: met (240.0)",
            "- S=4096: c=8 Python client >= 80% of attn_loadgen: NOT MET (21 %)",
            "- S=4096: c=64 >= c=8: NOT MET (230.0 against 240.0)",
            "- S=512: c=32 at >= 90% of the transport ceiling: NOT MET (85 %)",
            "- S=4096: c=32 Python client >= 80% of attn_loadgen: not measured (—)",
            "- S=4096: c=32 at >= 90% of the transport ceiling: met (93 %)",
            "| 512 | 32 | 2000.0 | 1700.0 | 1800.0 | 1.1× |",
            "- S=512: c=32 batching >= 3x unbatched, or the transport ceiling below that: met"
            " (1.1×; 3x unbatched = 5100.0 > ceiling 2000.0)",
            "- S=512: c=32 batching >= 3x unbatched, or the transport ceiling below that: met (4.0×)",
            "- S=512: c=32 batching >= 3x unbatched, or the transport ceiling below that: NOT MET"
            " (1.5×; 3x unbatched = 3000.0 <= ceiling 5000.0)",
            "- S=4096: c=32 at >= 90% of the transport ceiling: met (96 %)",
            "### w",
            "| 4096 | 32 | 300.0 | 260.0 | 87 % | 240.0 | 92 % | — | — |",
            "| 4096 | 8 | — | 199.0 | — | — | — | — | — |",
            "- S=4096, c=32: cuda 260.0 / 290.0 / 250.0; python 200.0 / 280.0 / 240.0;"
            " transport_only 300.0 / 280.0 / 310.0; share 87 % / 104 % / 81 %",
            "- S=4096: c=32 Python client >= 80% of attn_loadgen: met (92 %)",
            "- S=4096: c=32 at >= 90% of the transport ceiling: NOT MET (87 %)",
        ]:
            expect(line in out, f"line {line!r}", out)
        expect("notes" not in out, "other CSVs are ignored", out)
        expect("### b_w1" not in out, "a batched window belongs to its tag", out)
        expect("### w_w" not in out and "S=4096, c=8:" not in out,
               "windows belong to their tag; a point measured once has no spread line", out)

        usage = run()
        expect(usage.returncode == 2 and "throughput_table.py" in usage.stderr, "usage error",
               usage.stdout + usage.stderr)
        with tempfile.TemporaryDirectory() as empty:
            none = run(empty)
            expect(none.returncode == 1 and "no loadgen CSVs" in none.stderr,
                   "an empty folder is an error", none.stdout + none.stderr)
    print("throughput_table_test: passed")


if __name__ == "__main__":
    main()
