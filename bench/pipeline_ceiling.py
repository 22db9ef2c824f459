#!/usr/bin/env python3
"""The GPU pipeline ceiling of a request shape, in-process: what attn_server
could serve if the transport cost nothing.

For each stream count, every stream repeats one request's GPU work as the
CUDA executor does it — pinned host-to-device copies of Q, K and V, the
production kernel (through libattn_c.so), the device-to-host copy of O —
with all streams in flight at once; requests/s = requests / wall time after
a final synchronize (median of --repeats runs). Also the kernel alone,
launched back to back on one stream: the rate a transport that moves no
bytes at all (CUDA IPC) is compared with.

  pipeline_ceiling.py --lib <bundle>/lib/libattn_c.so --shape 1,4096,16,128
"""
import argparse
import statistics
import time

import torch

from attnlib import DTYPES, AttnLib


def parse_shape(text):
    b, s, h, d = (int(x) for x in text.split(","))
    return b, s, h, d


def rate(work, requests, repeats):
    """Median requests/s of `repeats` runs of work() (which enqueues `requests`)."""
    work()  # warm-up
    torch.cuda.synchronize()
    rates = []
    for _ in range(repeats):
        start = time.perf_counter()
        work()
        torch.cuda.synchronize()
        rates.append(requests / (time.perf_counter() - start))
    return statistics.median(rates)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--lib", required=True, help="path of libattn_c.so")
    ap.add_argument("--shape", default="1,4096,16,128", help="B,S,H,D")
    ap.add_argument("--dtype", default="bf16", choices=sorted(DTYPES))
    ap.add_argument("--kernel", default="flash_fwd")
    ap.add_argument("--streams", default="1,2,4,8")
    ap.add_argument("--requests", type=int, default=200, help="requests per run")
    ap.add_argument("--repeats", type=int, default=5)
    args = ap.parse_args()

    lib = AttnLib(args.lib)
    torch_dtype, code = DTYPES[args.dtype]
    shape = parse_shape(args.shape)
    tensor_bytes = torch.Size(shape).numel() * 2
    print(f"# GPU pipeline ceiling: {args.kernel}, shape {args.shape} {args.dtype}, "
          f"{3 * tensor_bytes / 2**20:.0f} MiB in, {tensor_bytes / 2**20:.0f} MiB out per request; "
          f"{torch.cuda.get_device_name()}")

    def make_stream_set():
        host = [torch.randn(shape, dtype=torch_dtype).pin_memory() for _ in range(3)]
        host_out = torch.empty(shape, dtype=torch_dtype).pin_memory()
        dev = [torch.empty(shape, dtype=torch_dtype, device="cuda") for _ in range(4)]
        return torch.cuda.Stream(), host, host_out, dev

    # The kernel alone, back to back on one stream.
    _, host, _, dev = make_stream_set()
    for d, h in zip(dev, host):
        d.copy_(h)

    def kernels():
        for _ in range(args.requests):
            lib.forward(args.kernel, code, dev[0], dev[1], dev[2], dev[3])

    print(f"kernel only (back to back, 1 stream): {rate(kernels, args.requests, args.repeats):.0f} requests/s")

    for n in (int(x) for x in args.streams.split(",")):
        sets = [make_stream_set() for _ in range(n)]
        per_stream = max(1, args.requests // n)

        def pipeline():
            for _ in range(per_stream):
                for stream, host, host_out, dev in sets:
                    with torch.cuda.stream(stream):
                        for d, h in zip(dev, host):
                            d.copy_(h, non_blocking=True)
                        lib.forward(args.kernel, code, dev[0], dev[1], dev[2], dev[3])
                        host_out.copy_(dev[3], non_blocking=True)

        r = rate(pipeline, per_stream * n, args.repeats)
        gbs = r * 4 * tensor_bytes / 1e9
        print(f"pipeline (pinned H2D + kernel + D2H), {n} stream(s): {r:.0f} requests/s "
              f"({gbs:.1f} GB/s of tensors)")


if __name__ == "__main__":
    main()
