"""The Python client and attn_cli against the CPU-backend attn_server.

Run by ctest with PYTHONPATH=<build>/client/python and ATTN_SERVER_BINARY,
ATTN_CLI_BINARY set. Inputs are fresh random data each run (the seed is
printed on failure); expected outputs come from a float64 NumPy reference.
The client suites run twice: through the native transport (the C++ client,
libattn_client_c.so, which CMake copies next to the package) and through
grpcio (the fallback).
"""

import os
import subprocess
import sys
import tempfile
import threading
import time
import unittest

import grpc
import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from attn_test_server import ServerProcess  # noqa: E402
from attnserve.v1 import attention_pb2  # noqa: E402
from attnserve_client import (  # noqa: E402
    AttnServeError,
    AttnServeTimeout,
    Client,
    attend,
    attention_reference,
    bf16_bits_to_float,
    flash_attn_func,
    flash_attn_varlen_func,
    float_to_bf16_bits,
    relative_l2_error,
    varlen_attention_reference,
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
    TRANSPORT = "native"

    @classmethod
    def setUpClass(cls):
        cls.client = Client(SERVER.address, transport=cls.TRANSPORT)

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
        self.assertEqual(self.client.transport, self.TRANSPORT)
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
        self.assertEqual(caught.exception.code(), grpc.StatusCode.INVALID_ARGUMENT)
        self.assertIn(SERVER.address, str(caught.exception))
        self.assertIsInstance(caught.exception, grpc.RpcError)
        self.assertIn("head_dim", caught.exception.details())
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
            Client("127.0.0.1:1", connect_timeout=1, transport=self.TRANSPORT)
        self.assertIn("127.0.0.1:1", str(caught.exception))
        self.assertIsInstance(caught.exception, AttnServeError)
        self.assertEqual(caught.exception.code(), grpc.StatusCode.UNAVAILABLE)

    def test_refused_connection_fails_long_before_the_connect_timeout(self):
        start = time.monotonic()
        with self.assertRaises(ConnectionError) as caught:
            Client("127.0.0.1:1", connect_timeout=60, transport=self.TRANSPORT)
        # About a second of retries; the bound leaves room for a loaded host.
        self.assertLess(time.monotonic() - start, 20, str(caught.exception))
        self.assertIn("refused", str(caught.exception))

    def test_errors_name_the_rpc_and_address_once(self):
        q = np.zeros((1, 8, 1, 8), np.float16)
        with self.assertRaises(AttnServeError) as caught:
            self.client.attend(q, q, q, kernel="no_such_kernel")
        text = str(caught.exception)
        self.assertEqual(text.count(SERVER.address), 1, text)
        self.assertTrue(text.startswith(f"Attend to {SERVER.address}: NOT_FOUND: "), text)
        self.assertTrue(caught.exception.details().startswith("kernel 'no_such_kernel'"),
                        caught.exception.details())

    def test_missed_deadline_is_a_timeout(self):
        # A deadline already past when the call starts (gRPC rounds deadlines
        # to milliseconds, and a small call may finish within one).
        q = np.zeros((1, 64, 2, 64), dtype=np.float16)
        for stream in (False, True):
            with self.assertRaises(TimeoutError) as caught:
                self.client.attend(q, q, q, timeout=-1.0, stream=stream)
            self.assertIsInstance(caught.exception, AttnServeTimeout)
            self.assertIsInstance(caught.exception, grpc.RpcError)
            self.assertEqual(caught.exception.code(), grpc.StatusCode.DEADLINE_EXCEEDED)
        with Client(SERVER.address, timeout=-1.0, fetch_server_info=False) as hurried:
            with self.assertRaises(AttnServeTimeout):
                hurried.stats()

    def test_stubs_have_the_protos_canonical_path(self):
        self.assertEqual(attention_pb2.DESCRIPTOR.name, "attnserve/v1/attention.proto")
        self.assertEqual(attention_pb2.DESCRIPTOR.package, "attnserve.v1")


def assert_lse_close(test, lse, ref, what):
    test.assertEqual(lse.dtype, np.float32)
    test.assertEqual(lse.shape, ref.shape)
    np.testing.assert_array_equal(np.isneginf(lse), np.isneginf(ref), what)
    finite = np.isfinite(ref)
    test.assertLess(float(np.abs(lse[finite] - ref[finite]).max()), 1e-3, what)


class BreadthTest(unittest.TestCase):
    """FlashAttention-2's options through the client and the real server."""

    TRANSPORT = "native"

    @classmethod
    def setUpClass(cls):
        cls.client = Client(SERVER.address, transport=cls.TRANSPORT)

    @classmethod
    def tearDownClass(cls):
        cls.client.close()

    def setUp(self):
        self.rng = np.random.default_rng(SEED)

    def test_gqa_causal_window_lse_unary_and_streamed(self):
        q = self.rng.standard_normal((2, 24, 4, 16)).astype(np.float16)
        k, v = (self.rng.standard_normal((2, 40, 2, 16)).astype(np.float16) for _ in range(2))
        for causal, window in ((True, (-1, -1)), (False, (6, 2)), (True, (4, -1))):
            ref, ref_lse = attention_reference(q, k, v, causal=causal, window_size=window,
                                               return_lse=True)
            results = [self.client.attend(q, k, v, causal=causal, window_size=window,
                                          return_lse=True, stream=stream)
                       for stream in (False, True)]
            for out, lse, timing in results:
                what = f"causal={causal} window={window} streamed={timing.streamed} seed {SEED}"
                self.assertEqual(out.shape, q.shape)
                self.assertLess(relative_l2_error(out, ref), TOLERANCE, what)
                assert_lse_close(self, lse, ref_lse, what)
            np.testing.assert_array_equal(results[0][0], results[1][0])
            np.testing.assert_array_equal(results[0][1], results[1][1])
        # Without return_lse the result is (out, timing), as before.
        out, timing = self.client.attend(q, k, v, causal=True)
        self.assertEqual(out.shape, q.shape)

    def test_kv_shorter_than_q_gives_empty_rows(self):
        q = self.rng.standard_normal((1, 20, 2, 8)).astype(np.float32)
        k, v = (self.rng.standard_normal((1, 8, 1, 8)).astype(np.float32) for _ in range(2))
        out, lse, _ = self.client.attend(q, k, v, dtype="fp16", causal=True, return_lse=True)
        exact = [t.astype(np.float16).astype(np.float64) for t in (q, k, v)]
        ref, ref_lse = attention_reference(*exact, causal=True, return_lse=True)
        self.assertTrue(np.isneginf(ref_lse).any())  # rows 0..11 see no key
        np.testing.assert_array_equal(out[:, :12], 0)
        self.assertLess(relative_l2_error(out, ref), TOLERANCE)
        assert_lse_close(self, lse, ref_lse, "bottom-right causal")

    def test_varlen(self):
        cu_q = np.array([0, 7, 7, 30], dtype=np.int32)
        cu_k = np.array([0, 9, 12, 40], dtype=np.int32)
        q = self.rng.standard_normal((30, 4, 16)).astype(np.float16)
        k, v = (self.rng.standard_normal((40, 2, 16)).astype(np.float16) for _ in range(2))
        for stream in (False, True):
            out, lse, timing = self.client.attend(q, k, v, cu_seqlens_q=cu_q, cu_seqlens_k=cu_k,
                                                  causal=True, return_lse=True, stream=stream)
            ref, ref_lse = varlen_attention_reference(q, k, v, cu_q, cu_k, causal=True,
                                                      return_lse=True)
            self.assertEqual(out.shape, q.shape)
            self.assertEqual(lse.shape, (4, 30))
            self.assertLess(relative_l2_error(out, ref), TOLERANCE, f"seed {SEED}")
            assert_lse_close(self, lse, ref_lse, f"varlen streamed={timing.streamed}")
        with self.assertRaises(ValueError):
            self.client.attend(q, k, v, cu_seqlens_q=cu_q)  # both or neither
        with self.assertRaises(ValueError):
            self.client.attend(q, k, v, cu_seqlens_q=cu_q[:-1], cu_seqlens_k=cu_k)  # not 30
        with self.assertRaises(ValueError):
            self.client.attend(q[None], k[None], v[None], cu_seqlens_q=cu_q, cu_seqlens_k=cu_k)

    def test_bad_breadth_arguments(self):
        q = np.zeros((1, 4, 4, 8), np.float16)
        with self.assertRaises(ValueError):
            self.client.attend(q, q[:, :, :3], q[:, :, :3])  # 3 kv heads do not divide 4
        with self.assertRaises(AttnServeError) as caught:
            self.client.attend(q, q, q, window_size=(-5, 0))
        self.assertEqual(caught.exception.code(), grpc.StatusCode.INVALID_ARGUMENT)

    def test_capabilities_are_listed(self):
        kernel = [k for k in self.client.list_kernels() if k.name == "cpu_reference"][0]
        self.assertTrue(kernel.causal and kernel.window and kernel.gqa and kernel.lse
                        and kernel.varlen and kernel.kv_seq_len_differs)


try:
    import torch
except ImportError:
    torch = None


class GrpcioClientTest(ClientTest):
    TRANSPORT = "grpcio"


class GrpcioBreadthTest(BreadthTest):
    TRANSPORT = "grpcio"


class TransportTest(unittest.TestCase):
    """The native transport against the grpcio fallback, and how one is chosen."""

    @classmethod
    def setUpClass(cls):
        cls.native = Client(SERVER.address, transport="native")
        cls.grpcio = Client(SERVER.address, transport="grpcio")

    @classmethod
    def tearDownClass(cls):
        cls.native.close()
        cls.grpcio.close()

    def setUp(self):
        self.rng = np.random.default_rng(SEED)

    def test_native_and_grpcio_give_the_same_bytes(self):
        q = self.rng.standard_normal((2, 40, 4, 32)).astype(np.float16)
        k, v = (self.rng.standard_normal((2, 56, 2, 32)).astype(np.float16) for _ in range(2))
        options = dict(causal=True, window_size=(8, -1), return_lse=True)
        out_n, lse_n, timing_n = self.native.attend(q, k, v, **options)
        out_g, lse_g, timing_g = self.grpcio.attend(q, k, v, **options)
        ref, ref_lse = attention_reference(q, k, v, return_lse=True, causal=True,
                                           window_size=(8, -1))
        self.assertLess(relative_l2_error(out_n, ref), TOLERANCE, f"seed {SEED}")
        assert_lse_close(self, lse_n, ref_lse, f"native lse, seed {SEED}")
        np.testing.assert_array_equal(out_n, out_g)  # the CPU backend is deterministic
        np.testing.assert_array_equal(lse_n, lse_g)
        self.assertEqual(out_n.dtype, np.float16)
        self.assertEqual((timing_n.backend, timing_n.kernel), (timing_g.backend, timing_g.kernel))
        self.assertGreaterEqual(timing_n.round_trip_ns, timing_n.total_ns + timing_n.marshal_ns)

    def test_native_path_copies_no_tensor_in_python(self):
        from attnserve_client.attend_call import make_call

        q = self.rng.standard_normal((1, 16, 2, 16)).astype(np.float16)
        call = make_call(q, q, q)
        # q, k, v reach the C library as pointers into the caller's arrays...
        self.assertTrue(all(np.shares_memory(bits, q) for bits in call.bits))
        # ...and attend returns a view of the uint16 array the library wrote O into.
        out, _ = self.native.attend(q, q, q)
        self.assertEqual(out.dtype, np.float16)
        self.assertIsInstance(out.base, np.ndarray)
        self.assertEqual((out.base.dtype, out.base.shape), (np.dtype("<u2"), q.shape))
        self.assertTrue(out.base.flags.owndata)

    def test_threads_share_one_native_client(self):
        q, k, v = (t.astype(np.float16) for t in random_inputs((1, 48, 2, 32), self.rng))
        expected, _ = self.native.attend(q, k, v)
        results = [None] * 8

        def work(i):
            results[i] = self.native.attend(q, k, v)[0]

        threads = [threading.Thread(target=work, args=(i,)) for i in range(len(results))]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        for out in results:
            np.testing.assert_array_equal(out, expected)

    def test_auto_falls_back_to_grpcio_without_the_library(self):
        saved = os.environ.get("ATTN_CLIENT_LIB")
        os.environ["ATTN_CLIENT_LIB"] = "/nonexistent/libattn_client_c.so"
        try:
            with Client(SERVER.address, fetch_server_info=False) as client:
                self.assertEqual(client.transport, "grpcio")
                self.assertIn("/nonexistent/libattn_client_c.so", client.transport_reason)
                self.assertEqual(client.health(), "SERVING")
            with self.assertRaises(ValueError) as caught:
                Client(SERVER.address, transport="native")
            self.assertIn("ATTN_CLIENT_LIB", str(caught.exception))
        finally:
            if saved is None:
                del os.environ["ATTN_CLIENT_LIB"]
            else:
                os.environ["ATTN_CLIENT_LIB"] = saved
        with Client(SERVER.address, fetch_server_info=False) as client:
            self.assertEqual(client.transport, "native")
        with self.assertRaises(ValueError):
            Client(SERVER.address, transport="carrier-pigeon")


@unittest.skipIf(torch is None, "torch is not installed")
class TorchTest(unittest.TestCase):
    """flash_attn_func / flash_attn_varlen_func on real torch tensors (FA2's conventions);
    torch_client_test covers the conversions with a stand-in where torch is absent."""

    @classmethod
    def setUpClass(cls):
        cls.client = Client(SERVER.address)

    @classmethod
    def tearDownClass(cls):
        cls.client.close()

    def test_flash_attn_func(self):
        gen = torch.Generator().manual_seed(SEED)
        q = torch.randn(2, 24, 4, 32, generator=gen).to(torch.bfloat16)
        k, v = (torch.randn(2, 36, 2, 32, generator=gen).to(torch.bfloat16) for _ in range(2))
        out, lse = flash_attn_func(q, k, v, causal=True, window_size=(8, -1), return_lse=True,
                                   client=self.client)
        self.assertEqual((out.shape, out.dtype, out.device), (q.shape, q.dtype, q.device))
        self.assertEqual((tuple(lse.shape), lse.dtype), ((2, 4, 24), torch.float32))
        exact = [t.float().numpy() for t in (q, k, v)]
        ref, ref_lse = attention_reference(*exact, causal=True, window_size=(8, -1),
                                           return_lse=True)
        self.assertLess(relative_l2_error(out.float().numpy(), ref), TOLERANCE)
        assert_lse_close(self, lse.numpy(), ref_lse, "torch")
        plain = flash_attn_func(q.half(), k.half(), v.half(), client=self.client)
        self.assertEqual(plain.dtype, torch.float16)
        if torch.cuda.is_available():
            on_gpu = flash_attn_func(q.cuda(), k.cuda(), v.cuda(), causal=True,
                                     window_size=(8, -1), client=self.client)
            self.assertEqual(on_gpu.device.type, "cuda")
            torch.testing.assert_close(on_gpu.cpu(), out, rtol=0, atol=0)

    def test_flash_attn_varlen_func(self):
        gen = torch.Generator().manual_seed(SEED)
        cu_q = torch.tensor([0, 5, 21], dtype=torch.int32)
        cu_k = torch.tensor([0, 9, 30], dtype=torch.int32)
        q = torch.randn(21, 4, 16, generator=gen).half()
        k, v = (torch.randn(30, 1, 16, generator=gen).half() for _ in range(2))
        out, lse = flash_attn_varlen_func(q, k, v, cu_q, cu_k, 16, 21, causal=True,
                                          return_lse=True, client=self.client)
        self.assertEqual(tuple(out.shape), (21, 4, 16))
        self.assertEqual(tuple(lse.shape), (4, 21))
        ref = varlen_attention_reference(q.float().numpy(), k.float().numpy(), v.float().numpy(),
                                         cu_q.numpy(), cu_k.numpy(), causal=True)
        self.assertLess(relative_l2_error(out.float().numpy(), ref), TOLERANCE)
        with self.assertRaises(TypeError):
            flash_attn_func(q.float()[None], k.float()[None], v.float()[None], client=self.client)


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

    def test_breadth_flags_with_npy(self):
        q = self.rng.standard_normal((1, 20, 4, 16)).astype(np.float16)
        k, v = (self.rng.standard_normal((1, 33, 1, 16)).astype(np.float16) for _ in range(2))
        for name, tensor in zip("qkv", (q, k, v)):
            np.save(self.path(f"{name}.npy"), tensor)
        result = self.run_cli("attend", f"--address={SERVER.address}", f"--q={self.path('q.npy')}",
                              f"--k={self.path('k.npy')}", f"--v={self.path('v.npy')}",
                              f"--out={self.path('o.npy')}", f"--lse_out={self.path('lse.npy')}",
                              "--causal", "--window=5,-1", "--check")
        self.assertEqual(result.returncode, 0, result.stderr + result.stdout)
        self.assertIn("Sk=33", result.stdout)
        self.assertIn("PASS", result.stdout)
        out, lse = np.load(self.path("o.npy")), np.load(self.path("lse.npy"))
        ref, ref_lse = attention_reference(q, k, v, causal=True, window_size=(5, -1),
                                           return_lse=True)
        self.assertEqual(out.dtype, np.float16)
        self.assertLess(relative_l2_error(out, ref), TOLERANCE)
        assert_lse_close(self, lse, ref_lse, "attn_cli --lse_out")
        with Client(SERVER.address) as client:
            expected, expected_lse, _ = client.attend(q, k, v, causal=True, window_size=(5, -1),
                                                      return_lse=True)
        np.testing.assert_array_equal(out, expected)
        np.testing.assert_array_equal(lse, expected_lse)

    def test_varlen_npy(self):
        q = self.rng.standard_normal((12, 2, 16)).astype(np.float16)
        k, v = (self.rng.standard_normal((15, 2, 16)).astype(np.float16) for _ in range(2))
        for name, tensor in zip("qkv", (q, k, v)):
            np.save(self.path(f"{name}.npy"), tensor)
        result = self.run_cli("attend", f"--address={SERVER.address}", f"--q={self.path('q.npy')}",
                              f"--k={self.path('k.npy')}", f"--v={self.path('v.npy')}",
                              f"--out={self.path('o.npy')}", "--cu_seqlens_q=0,4,12",
                              "--cu_seqlens_k=0,3,15", "--causal", "--check")
        self.assertEqual(result.returncode, 0, result.stderr + result.stdout)
        out = np.load(self.path("o.npy"))
        self.assertEqual(out.shape, q.shape)
        ref = varlen_attention_reference(q, k, v, [0, 4, 12], [0, 3, 15], causal=True)
        self.assertLess(relative_l2_error(out, ref), TOLERANCE)

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
