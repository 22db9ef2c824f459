"""python3 -m attnserve_client {health,info,kernels,attend,bench} [--address=HOST:PORT]

A small command line for hosts with Python but without attn_cli. `health`
exits 0 only when the server is SERVING; `attend --check` exits 3 when the
relative error against a float64 NumPy reference exceeds --tolerance.
`bench` measures requests/s at each --concurrency (threads sharing one
client; bench.py). --transport picks the client's transport (Client's
`transport`); health, attend and bench need no grpcio with the native one.
`--version` prints the package's version (the repository's VERSION).
"""

import argparse
import sys

import numpy as np

from ._version import __version__
from .bench import bench
from .client import TRANSPORTS, Client
from .errors import AttnServeError
from .reference import attention_reference, relative_l2_error
from .tensors import parse_dtype, to_float64, to_wire


def main(argv=None):
    parser = argparse.ArgumentParser(prog="python3 -m attnserve_client", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--version", action="version", version=f"attnserve_client {__version__}")
    parser.add_argument("command", choices=["health", "info", "kernels", "attend", "bench"])
    parser.add_argument("--address", default="localhost:50051")
    parser.add_argument("--transport", choices=TRANSPORTS, default="auto")
    parser.add_argument("--connect_timeout", type=float, default=5.0)
    parser.add_argument("--shape", default="1,128,4,64", help="attend: B,S,H,D")
    parser.add_argument("--dtype", default="bf16", help="attend: bf16 or fp16")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--check", action="store_true")
    parser.add_argument("--tolerance", type=float, default=1e-2)
    parser.add_argument("--concurrency", default="1,8,32,64",
                        help="bench: comma-separated numbers of calls in flight")
    parser.add_argument("--warmup", type=float, default=2.0, help="bench: seconds per level")
    parser.add_argument("--duration", type=float, default=10.0, help="bench: seconds per level")
    parser.add_argument("--channels", type=int, default=1,
                        help="bench: clients (connections) the threads share round robin")
    args = parser.parse_args(argv)

    try:
        clients = [Client(args.address, connect_timeout=args.connect_timeout,
                          transport=args.transport,
                          fetch_server_info=args.command in ("info", "attend", "bench"))
                   for _ in range(args.channels if args.command == "bench" else 1)]
    except (ConnectionError, ValueError) as error:
        print(f"{args.command}: {error}", file=sys.stderr)
        return 1
    client = clients[0]
    if args.command == "bench":
        try:
            shape = tuple(int(x) for x in args.shape.split(","))
            levels = [int(x) for x in args.concurrency.split(",")]
            return bench(clients, shape, parse_dtype(args.dtype), levels, args.warmup,
                         args.duration, sys.stdout)
        except (AttnServeError, ValueError) as error:
            print(f"bench: {error}", file=sys.stderr)
            return 1
        finally:
            for c in clients:
                c.close()
    with client:
        try:
            if args.command == "health":
                status = client.health()
                print(status)
                return 0 if status == "SERVING" else 1
            if args.command == "info":
                print(client.info)
                return 0
            if args.command == "kernels":
                for kernel in client.list_kernels():
                    print(f"{kernel.ladder_step:>3} {kernel.name:<22} {kernel.backend:<5} "
                          f"{kernel.description}")
                return 0
            shape = tuple(int(x) for x in args.shape.split(","))
            rng = np.random.default_rng(args.seed)
            q, k, v = (rng.standard_normal(shape, dtype=np.float32) for _ in range(3))
            dtype = parse_dtype(args.dtype)
            out, timing = client.attend(q, k, v, dtype=dtype)
            print(f"transport {client.transport} ({client.transport_reason})")
            print(timing)
            if args.check:
                exact = [to_float64(to_wire(t, dtype)[2], dtype) for t in (q, k, v)]
                error = relative_l2_error(out, attention_reference(*exact))
                ok = error <= args.tolerance
                print(f"check: relative L2 error {error:.3e} (tolerance {args.tolerance:.1e}): "
                      f"{'PASS' if ok else 'FAIL'}")
                return 0 if ok else 3
            return 0
        except (AttnServeError, ValueError) as error:
            print(f"{args.command}: {error}", file=sys.stderr)
            return 1


if __name__ == "__main__":
    sys.exit(main())
