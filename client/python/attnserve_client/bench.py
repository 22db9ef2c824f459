"""Closed-loop throughput of the Python client: `python3 -m attnserve_client bench`.

For each concurrency level N, N Python threads share one Client (or
--channels of them, round robin) and each sends a new request as soon as
its previous one returns. After --warmup seconds, completions are counted
for --duration seconds; requests/s is that count over the window, and the
latencies are those of the requests that finished in it. With the native
transport the GIL is released during each call, so the N calls run in
parallel in C++; with grpcio they contend for the GIL.
"""

import threading
import time

import numpy as np

from .tensors import to_wire


def run_level(clients, arrays, concurrency, warmup_s, duration_s, attend_kwargs):
    """(requests/s, sorted latencies in s, failures) of one level."""
    lock = threading.Lock()
    latencies, failures = [], []
    begin = time.perf_counter()
    window_start, window_end = begin + warmup_s, begin + warmup_s + duration_s

    def worker(index):
        client = clients[index % len(clients)]
        while True:
            sent = time.perf_counter()
            if sent >= window_end:
                return
            try:
                client.attend(*arrays, **attend_kwargs)
            except Exception as error:  # counted and reported, the loop goes on
                with lock:
                    failures.append(error)
                continue
            done = time.perf_counter()
            if window_start <= done <= window_end:
                with lock:
                    latencies.append(done - sent)

    threads = [threading.Thread(target=worker, args=(i,)) for i in range(concurrency)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return len(latencies) / duration_s, sorted(latencies), failures


def percentile(values, p):
    return values[min(len(values) - 1, int(p / 100 * len(values)))] if values else float("nan")


def random_bits(shape, dtype, rng):
    """bf16/fp16 bit patterns of N(0, 1) values: sent as they are (dtype= names the type)."""
    values = rng.standard_normal(shape, dtype=np.float32)
    return to_wire(values, dtype)[2]


def bench(clients, shape, dtype, levels, warmup_s, duration_s, out):
    """Runs every level and prints one line each; returns 0 when every level completed requests."""
    rng = np.random.default_rng(0)
    arrays = [random_bits(shape, dtype, rng) for _ in range(3)]
    tensor_bytes = 4 * arrays[0].nbytes  # q, k, v in, o out
    _, first = clients[0].attend(*arrays, dtype=dtype)  # also checks the call works
    print(f"bench: {dtype} {list(shape)}, transport {clients[0].transport} "
          f"({clients[0].transport_reason}), {len(clients)} client(s), backend {first.backend} "
          f"({first.device}), kernel {first.kernel}", file=out)
    print(f"{'concurrency':>11} {'requests/s':>11} {'GB/s':>7} {'p50 ms':>8} {'p99 ms':>8} "
          f"{'failed':>6}", file=out)
    ok = True
    for level in levels:
        rate, latencies, failures = run_level(clients, arrays, level, warmup_s, duration_s,
                                              {"dtype": dtype})
        print(f"{level:>11} {rate:>11.1f} {rate * tensor_bytes / 1e9:>7.2f} "
              f"{percentile(latencies, 50) * 1e3:>8.2f} {percentile(latencies, 99) * 1e3:>8.2f} "
              f"{len(failures):>6}", file=out, flush=True)
        if failures:
            print(f"  first failure: {failures[0]}", file=out)
        ok = ok and bool(latencies)
    return 0 if ok else 1
