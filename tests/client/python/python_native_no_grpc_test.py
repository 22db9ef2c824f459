"""The native transport on a host without grpcio or protobuf (the GPU hosts).

grpc, google.protobuf and the generated stubs are made unimportable before
attnserve_client is imported (sys.modules entries set to None make `import`
raise ImportError). Then, against the CPU-backend attn_server: attend in
native mode matches the float64 NumPy reference, a bad shape raises
AttnServeError with code INVALID_ARGUMENT (the package's own StatusCode) and
the server's message, health works, and `python -m attnserve_client bench`
completes requests. Run by ctest like python_client_test.py.
"""

import io
import os
import sys
import unittest

for blocked in ("grpc", "google.protobuf", "attnserve.v1.attention_pb2",
                "attnserve.v1.attention_pb2_grpc"):
    sys.modules[blocked] = None

import numpy as np  # noqa: E402

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from attn_test_server import ServerProcess  # noqa: E402
from attnserve_client import (  # noqa: E402
    AttnServeError,
    Client,
    StatusCode,
    attention_reference,
    relative_l2_error,
)
from attnserve_client.__main__ import main  # noqa: E402

SEED = int.from_bytes(os.urandom(4), "little")


class NativeWithoutGrpcTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.server = ServerProcess(["--backend=cpu", "--cpu_threads=1"]).__enter__()
        cls.client = Client(cls.server.address, transport="native")

    @classmethod
    def tearDownClass(cls):
        cls.client.close()
        cls.server.__exit__(None, None, None)

    def test_grpc_is_really_unimportable(self):
        with self.assertRaises(ImportError):
            import grpc  # noqa: F401
        self.assertEqual(self.client.transport, "native")
        self.assertEqual(self.client.health(), "SERVING")

    def test_attend_matches_the_reference(self):
        rng = np.random.default_rng(SEED)
        q = rng.standard_normal((2, 30, 4, 32)).astype(np.float16)
        k, v = (rng.standard_normal((2, 45, 2, 32)).astype(np.float16) for _ in range(2))
        out, lse, timing = self.client.attend(q, k, v, causal=True, return_lse=True)
        ref, ref_lse = attention_reference(q, k, v, causal=True, return_lse=True)
        self.assertLess(relative_l2_error(out, ref), 1e-2, f"seed {SEED}")
        finite = np.isfinite(ref_lse)
        self.assertLess(float(np.abs(lse[finite] - ref_lse[finite]).max()), 1e-3)
        self.assertEqual(timing.backend, "cpu")

    def test_bad_shape_is_invalid_argument_with_the_servers_message(self):
        q = np.zeros((1, 4, 1, 513), dtype=np.float16)  # head_dim above the CPU limit
        with self.assertRaises(AttnServeError) as caught:
            self.client.attend(q, q, q)
        self.assertIs(caught.exception.code(), StatusCode.INVALID_ARGUMENT)
        self.assertIn("head_dim", caught.exception.details())
        self.assertIn(self.server.address, str(caught.exception))

    def test_bench_command(self):
        out = io.StringIO()
        saved, sys.stdout = sys.stdout, out
        try:
            code = main(["bench", f"--address={self.server.address}", "--transport=native",
                         "--shape=1,32,2,32", "--dtype=bf16", "--concurrency=1,4",
                         "--warmup=0.2", "--duration=1"])
        finally:
            sys.stdout = saved
        self.assertEqual(code, 0, out.getvalue())
        lines = out.getvalue().splitlines()
        self.assertIn("transport native", lines[0])
        rows = [line.split() for line in lines[2:] if line.strip()[:1].isdigit()]
        self.assertEqual([r[0] for r in rows], ["1", "4"], out.getvalue())
        self.assertTrue(all(float(r[1]) > 0 and r[5] == "0" for r in rows), out.getvalue())


if __name__ == "__main__":
    unittest.main(verbosity=2)
