"""The Python client and attn_cli against the CPU-backend attn_server.

Run by ctest with PYTHONPATH=<build>/client/python and ATTN_SERVER_BINARY,
ATTN_CLI_BINARY set. Inputs are fresh random data each run (the seed is
printed on failure); expected outputs come from a float64 NumPy reference.
"""

import os
import subprocess
import sys
import tempfile
import unittest

import grpc
import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from attn_test_server import ServerProcess  # noqa: E402
from attnserve_client import (  # noqa: E402
    AttnServeError,
    Client,
    attend,
    attention_reference,
    bf16_bits_to_float,
    float_to_bf16_bits,
    relative_l2_error,
)
from attnserve_client import health as health_codec  # noqa: E402

TOLERANCE = 1e-2
# A small message limit makes the server's AttendStream path reachable with
# test-sized tensors: 3 x 64 KiB requests no longer fit one message.
MAX_MESSAGE_BYTES = 96 * 1024
SEED = int.from_bytes(os.urandom(4), "little")


def setUpModule():
    global SERVER
    SERVER = ServerProcess(["--backend=cpu", "--cpu_threads=1",
                            f"--max_message_bytes={MAX_MESSAGE_BYTES}"]).__enter__()


def tearDownModule():
    SERVER.__exit__(None, None, None)


def random_inputs(shape, rng):
    return [rng.standard_normal(shape).astype(np.float32) for _ in range(3)]


class TensorConversionTest(unittest.TestCase):
    def test_bf16_rounding_matches_round_to_nearest_even(self):
        values = np.array([1.0, -2.5, 1.00390625, 1.01171875, np.inf, -0.0], dtype=np.float32)
        bits = float_to_bf16_bits(values)
        # 1 + 2^-8 is a tie: rounds to even (1.0); 1 + 3*2^-8 rounds up.
        np.testing.assert_array_equal(bits, [0x3F80, 0xC020, 0x3F80, 0x3F82, 0x7F80, 0x8000])
        np.testing.assert_array_equal(bf16_bits_to_float(bits)[:2], values[:2])
        self.assertTrue(np.isnan(bf16_bits_to_float(float_to_bf16_bits(np.float32([np.nan])))))

    def test_health_codec(self):
        self.assertEqual(health_codec.encode_request(""), b"")
        self.assertEqual(health_codec.encode_request("a.B"), b"\x0a\x03a.B")
        self.assertEqual(health_codec.decode_response(b"\x08\x01"), 1)
        self.assertEqual(health_codec.decode_response(b"\x12\x01x\x08\x02"), 2)
        with self.assertRaises(ValueError):
            health_codec.decode_response(b"\x08")


class ClientTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.client = Client(SERVER.address)

    @classmethod
    def tearDownClass(cls):
        cls.client.close()

    def setUp(self):
        self.rng = np.random.default_rng(SEED)

    def check(self, out, exact_inputs, what):
        ref = attention_reference(*exact_inputs)
        error = relative_l2_error(np.asarray(out, dtype=np.float64), ref)
        self.assertLess(error, TOLERANCE, f"{what}: relative error {error} (seed {SEED})")

    def test_fp16_arrays(self):
        q, k, v = (t.astype(np.float16) for t in random_inputs((2, 33, 3, 16), self.rng))
        out, timing = self.client.attend(q, k, v)
        self.assertEqual(out.dtype, np.float16)
        self.assertEqual(out.shape, q.shape)
        self.check(out, (q, k, v), "fp16")
        self.assertFalse(timing.streamed)
        self.assertEqual(timing.backend, "cpu")
        self.assertGreater(timing.total_ns, 0)
        self.assertGreaterEqual(timing.round_trip_ns, timing.total_ns)
        self.assertIn("server kernel", str(timing))

    def test_float32_converted_to_bf16(self):
        q, k, v = random_inputs((1, 40, 2, 32), self.rng)
        out, _ = self.client.attend(q, k, v, dtype="bf16")
        self.assertEqual(out.dtype, np.float32)
        exact = [bf16_bits_to_float(float_to_bf16_bits(t)) for t in (q, k, v)]
        self.check(out, exact, "bf16 from float32")

    def test_raw_bits_and_scale(self):
        q, k, v = (float_to_bf16_bits(t) for t in random_inputs((1, 24, 2, 16), self.rng))
        out, _ = self.client.attend(q, k, v, dtype="bf16", softmax_scale=0.5)
        self.assertEqual(out.dtype, np.uint16)
        ref = attention_reference(*(bf16_bits_to_float(t) for t in (q, k, v)), softmax_scale=0.5)
        self.assertLess(relative_l2_error(bf16_bits_to_float(out), ref), TOLERANCE)

    def test_stream_forced_and_automatic(self):
        q, k, v = (t.astype(np.float16) for t in random_inputs((1, 128, 4, 64), self.rng))
        self.assertGreater(3 * q.nbytes, self.client.stream_threshold_bytes)
        auto, timing = self.client.attend(q, k, v)  # too big for one message
        self.assertTrue(timing.streamed)
        self.check(auto, (q, k, v), "streamed")
        small = [t[:, :32] for t in (q, k, v)]
        unary, t1 = self.client.attend(*small, stream=False)
        streamed, t2 = self.client.attend(*small, stream=True)
        self.assertFalse(t1.streamed)
        self.assertTrue(t2.streamed)
        np.testing.assert_array_equal(unary, streamed)

    def test_server_errors_raise_with_their_code(self):
        q = np.zeros((1, 4, 1, 513), dtype=np.float16)  # head_dim above the CPU limit
        with self.assertRaises(AttnServeError) as caught:
            self.client.attend(q, q, q)
        self.assertEqual(caught.exception.code, grpc.StatusCode.INVALID_ARGUMENT)
        self.assertIn(SERVER.address, str(caught.exception))
        with self.assertRaises(ValueError):
            self.client.attend(q, q[:, :2], q)  # shapes differ
        with self.assertRaises(ValueError):
            self.client.attend(np.zeros((4, 4), np.float16), q, q)  # not 4-D

    def test_queries(self):
        self.assertEqual(self.client.health(), "SERVING")
        self.assertEqual(self.client.health("no.such.Service"), "SERVICE_UNKNOWN")
        self.assertIn("cpu_reference", [k.name for k in self.client.list_kernels()])
        self.assertEqual(self.client.info.backend, "cpu")
        self.assertEqual(self.client.info.limits.max_message_bytes, MAX_MESSAGE_BYTES)
        self.assertGreater(self.client.stats().requests_ok, 0)

    def test_module_level_attend(self):
        q, k, v = (t.astype(np.float16) for t in random_inputs((1, 8, 1, 8), self.rng))
        out, _ = attend(q, k, v, address=SERVER.address, timeout=30)
        self.check(out, (q, k, v), "attend()")

    def test_unreachable_address_raises_connection_error(self):
        with self.assertRaises(ConnectionError) as caught:
            Client("127.0.0.1:1", connect_timeout=1)
        self.assertIn("127.0.0.1:1", str(caught.exception))


def write_ml_dtypes_bf16_npy(path, bits):
    """What np.save writes for an ml_dtypes.bfloat16 array: descr '<V2'."""
    with open(path, "wb") as f:
        np.lib.format.write_array_header_1_0(
            f, {"descr": "<V2", "fortran_order": False, "shape": bits.shape})
        f.write(np.ascontiguousarray(bits, dtype="<u2").tobytes())


class CliTest(unittest.TestCase):
    """attn_cli's .npy input/output and exit codes, checked with NumPy."""

    def run_cli(self, *args):
        return subprocess.run([os.environ["ATTN_CLI_BINARY"], *args], capture_output=True,
                              text=True, timeout=120)

    def setUp(self):
        self.rng = np.random.default_rng(SEED)
        self.tmp = tempfile.TemporaryDirectory(prefix="attn_cli_test_")

    def tearDown(self):
        self.tmp.cleanup()

    def path(self, name):
        return os.path.join(self.tmp.name, name)

    def test_fp16_npy_round_trip(self):
        q, k, v = (t.astype(np.float16) for t in random_inputs((1, 48, 2, 32), self.rng))
        for name, tensor in zip("qkv", (q, k, v)):
            np.save(self.path(f"{name}.npy"), tensor)
        result = self.run_cli("attend", f"--address={SERVER.address}", f"--q={self.path('q.npy')}",
                              f"--k={self.path('k.npy')}", f"--v={self.path('v.npy')}",
                              f"--out={self.path('o.npy')}", "--check")
        self.assertEqual(result.returncode, 0, result.stderr + result.stdout)
        self.assertIn("server kernel", result.stdout)
        self.assertIn("PASS", result.stdout)
        out = np.load(self.path("o.npy"))
        self.assertEqual(out.dtype, np.float16)
        self.assertEqual(out.shape, q.shape)
        with Client(SERVER.address) as client:
            expected, _ = client.attend(q, k, v)
        np.testing.assert_array_equal(out, expected)

    def test_bf16_npy_as_ml_dtypes_saves_it(self):
        bits = [float_to_bf16_bits(t) for t in random_inputs((2, 16, 2, 16), self.rng)]
        for name, tensor in zip("qkv", bits):
            write_ml_dtypes_bf16_npy(self.path(f"{name}.npy"), tensor)
        result = self.run_cli("attend", f"--address={SERVER.address}", f"--q={self.path('q.npy')}",
                              f"--k={self.path('k.npy')}", f"--v={self.path('v.npy')}",
                              f"--out={self.path('o.npy')}")
        self.assertEqual(result.returncode, 0, result.stderr + result.stdout)
        out = np.load(self.path("o.npy"))
        self.assertEqual(out.dtype, np.dtype("V2"))  # as np.load returns ml_dtypes' bf16
        out_bits = out.view(np.uint16)
        ref = attention_reference(*(bf16_bits_to_float(t) for t in bits))
        self.assertLess(relative_l2_error(bf16_bits_to_float(out_bits), ref), TOLERANCE)
        with Client(SERVER.address) as client:
            expected, _ = client.attend(*bits, dtype="bf16")
        np.testing.assert_array_equal(out_bits, expected)

    def test_float32_npy_needs_and_uses_dtype(self):
        q, k, v = random_inputs((1, 8, 1, 16), self.rng)
        for name, tensor in zip("qkv", (q, k, v)):
            np.save(self.path(f"{name}.npy"), tensor)
        args = ["attend", f"--address={SERVER.address}", f"--q={self.path('q.npy')}",
                f"--k={self.path('k.npy')}", f"--v={self.path('v.npy')}"]
        result = self.run_cli(*args)
        self.assertEqual(result.returncode, 1)
        self.assertIn("name the dtype", result.stderr)
        result = self.run_cli(*args, "--dtype=fp16", "--check")
        self.assertEqual(result.returncode, 0, result.stderr)

    def test_exit_codes(self):
        result = self.run_cli("health", f"--address={SERVER.address}")
        self.assertEqual((result.returncode, result.stdout.strip()), (0, "SERVING"))
        result = self.run_cli("health", "--address=127.0.0.1:1", "--connect_timeout=1s")
        self.assertEqual(result.returncode, 1)
        self.assertIn("cannot connect", result.stderr)
        self.assertIn("127.0.0.1:1", result.stderr)
        result = self.run_cli("attend", f"--address={SERVER.address}", "--shape=1,16,2,16",
                              "--check", "--tolerance=1e-12")
        self.assertEqual(result.returncode, 3, result.stdout)
        self.assertIn("FAIL", result.stdout)
        self.assertEqual(self.run_cli("attend", "--shape=1,2,3").returncode, 2)
        self.assertEqual(self.run_cli("frobnicate").returncode, 2)
        result = self.run_cli("info", f"--address={SERVER.address}", "--json")
        self.assertEqual(result.returncode, 0, result.stderr)
        self.assertIn('"backend": "cpu"', result.stdout)


if __name__ == "__main__":
    unittest.main(verbosity=2)
