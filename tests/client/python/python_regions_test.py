"""Same-host shared memory in the Python client and attn_cli (issue 12),
against the CPU-backend attn_server started with --allow_shared_memory.

NumPy arrays placed in a SystemSharedMemory and registered go by reference
and give the float64 reference's result and the inline call's bytes (the CPU
backend with one thread is deterministic); outputs are written in place;
regions are listed, unregistered, and end with the client; mistakes are
refused naming the argument. Each client suite runs through both transports
(native and grpcio). The CUDA IPC path is checked here only as far as a CPU
host allows (torch's handle formats, a stand-in tensor's export, the CPU
server's refusal); torch_cuda_ipc_test.py runs it for real on a GPU host.
Run by ctest with PYTHONPATH=<build>/client/python, ATTN_SERVER_BINARY and
ATTN_CLI_BINARY set.
"""

import os
import signal
import subprocess
import sys
import textwrap
import time
import unittest

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import fake_torch  # noqa: E402
from attn_test_server import ServerProcess  # noqa: E402
from attnserve_client import (  # noqa: E402
    AttnServeError,
    Client,
    SystemSharedMemory,
    TensorRef,
    attention_reference,
    bf16_bits_to_float,
    float_to_bf16_bits,
    relative_l2_error,
    varlen_attention_reference,
)
from attnserve_client import cuda_ipc  # noqa: E402

TOLERANCE = 1e-2
SEED = int.from_bytes(os.urandom(4), "little")
WAIT_S = 30  # bound on waiting for the server or the resource tracker to act


def setUpModule():
    global SERVER, PLAIN_SERVER
    SERVER = ServerProcess(["--backend=cpu", "--cpu_threads=1", "--allow_shared_memory"])
    SERVER.__enter__()
    PLAIN_SERVER = ServerProcess(["--backend=cpu", "--cpu_threads=1"]).__enter__()


def tearDownModule():
    SERVER.__exit__(None, None, None)
    PLAIN_SERVER.__exit__(None, None, None)


def wait_until(condition):
    """True once condition() holds, False after WAIT_S: for what the server or
    another process does asynchronously (ending a lease, unlinking a name)."""
    deadline = time.monotonic() + WAIT_S
    while not condition():
        if time.monotonic() > deadline:
            return False
        time.sleep(0.01)
    return True


class SystemRegionTest(unittest.TestCase):
    TRANSPORT = "native"

    @classmethod
    def setUpClass(cls):
        cls.client = Client(SERVER.address, transport=cls.TRANSPORT)

    @classmethod
    def tearDownClass(cls):
        cls.client.close()

    def setUp(self):
        self.rng = np.random.default_rng(SEED)
        self.shm = SystemSharedMemory(1 << 20)
        self.addCleanup(self.shm.close)
        self.region = self.client.register_system_region("io", self.shm)
        self.addCleanup(self.unregister, "io")

    def unregister(self, name):
        if any(r.name == name for r in self.client.list_regions()):
            self.client.unregister_region(name)

    def fill(self, shape, dtype=np.float16):
        array = self.shm.ndarray(shape, dtype)
        array[...] = self.rng.standard_normal(shape).astype(dtype)
        return array

    def test_tensors_in_a_region_match_the_reference_and_the_inline_call(self):
        q = self.fill((2, 33, 4, 16))
        k, v = self.fill((2, 40, 2, 16)), self.fill((2, 40, 2, 16))
        out = self.shm.ndarray(q.shape, np.float16)
        lse = self.shm.ndarray((2, 4, 33), np.float32)
        before = self.client.stats()
        result, lse_result, timing = self.client.attend(q, k, v, causal=True, return_lse=True,
                                                        out=out, lse_out=lse)
        after = self.client.stats()
        self.assertIs(result, out)
        self.assertIs(lse_result, lse)
        self.assertEqual((timing.q_path, timing.k_path, timing.v_path, timing.out_path,
                          timing.lse_path), ("system_shm",) * 5)
        self.assertIn("tensors: q system_shm", str(timing))
        self.assertEqual(after.region_bytes_in - before.region_bytes_in,
                         q.nbytes + k.nbytes + v.nbytes)
        self.assertEqual(after.region_bytes_out - before.region_bytes_out,
                         out.nbytes + lse.nbytes)

        ref, ref_lse = attention_reference(q, k, v, causal=True, return_lse=True)
        self.assertLess(relative_l2_error(out, ref), TOLERANCE, f"seed {SEED}")
        finite = np.isfinite(ref_lse)
        self.assertLess(float(np.abs(lse[finite] - ref_lse[finite]).max()), 1e-3)
        inline_out, inline_lse, inline_timing = self.client.attend(
            q.copy(), k.copy(), v.copy(), causal=True, return_lse=True)
        np.testing.assert_array_equal(out, inline_out)
        np.testing.assert_array_equal(lse, inline_lse)
        self.assertEqual((inline_timing.q_path, inline_timing.out_path), ("inline", "inline"))
        self.assertNotIn("tensors:", str(inline_timing))

    def test_bf16_varlen_inputs_by_reference_and_the_output_inline(self):
        cu_q, cu_k = np.array([0, 5, 5, 26], np.int32), np.array([0, 9, 12, 29], np.int32)
        q = self.shm.ndarray((26, 2, 16), np.uint16)  # raw bf16 bits
        k, v = self.shm.ndarray((29, 1, 16), np.uint16), self.shm.ndarray((29, 1, 16), np.uint16)
        for t in (q, k, v):
            t[...] = float_to_bf16_bits(self.rng.standard_normal(t.shape).astype(np.float32))
        options = dict(dtype="bf16", causal=True, cu_seqlens_q=cu_q, cu_seqlens_k=cu_k)
        out, timing = self.client.attend(q, k, v, **options)
        self.assertEqual((timing.q_path, timing.k_path, timing.v_path, timing.out_path),
                         ("system_shm", "system_shm", "system_shm", "inline"))
        self.assertFalse(np.shares_memory(out, q))
        inline, _ = self.client.attend(q.copy(), k.copy(), v.copy(), **options)
        np.testing.assert_array_equal(out, inline)
        ref = varlen_attention_reference(*(bf16_bits_to_float(t) for t in (q, k, v)), cu_q, cu_k,
                                         causal=True)
        self.assertLess(relative_l2_error(bf16_bits_to_float(out), ref), TOLERANCE,
                        f"seed {SEED}")

    def test_inline_and_referenced_tensors_mix(self):
        q = self.fill((1, 24, 2, 32))
        k, v = (self.rng.standard_normal((1, 24, 2, 32)).astype(np.float16) for _ in range(2))
        out, timing = self.client.attend(q, k, v)
        self.assertEqual((timing.q_path, timing.k_path, timing.out_path),
                         ("system_shm", "inline", "inline"))
        np.testing.assert_array_equal(out, self.client.attend(q.copy(), k, v)[0])

    def test_tensor_refs_name_a_region_this_process_has_not_mapped(self):
        other = SystemSharedMemory(64 << 10)
        self.addCleanup(other.close)
        q, k, v = (other.ndarray((1, 16, 2, 16), np.float16) for _ in range(3))
        for t in (q, k, v):
            t[...] = self.rng.standard_normal(t.shape)
        region = self.client.register_system_region("by-name", other.name,
                                                    byte_size=other.size)
        self.addCleanup(self.unregister, "by-name")
        self.assertIsNone(region.address)
        refs = [TensorRef(region, other.offset_of(t), t.shape, "fp16") for t in (q, k, v)]
        out_ref = TensorRef(region, 32768, q.shape, "fp16")
        result, timing = self.client.attend(*refs, out=out_ref)
        self.assertIs(result, out_ref)
        self.assertEqual(timing.out_path, "system_shm")
        expected, _ = self.client.attend(q.copy(), k.copy(), v.copy())
        np.testing.assert_array_equal(other.ndarray(q.shape, np.float16, offset=32768), expected)
        # A TensorRef into memory mapped here comes back as a NumPy view of it.
        view, _ = self.client.attend(q, k, v, out=TensorRef(self.region, 4096, q.shape, "fp16"))
        self.assertEqual(self.shm.offset_of(view), 4096)
        np.testing.assert_array_equal(view, expected)

    def test_regions_are_listed_and_unregistered(self):
        listed = {r.name: r for r in self.client.list_regions()}
        self.assertEqual(listed["io"].region_id, self.region.region_id)
        self.assertEqual(listed["io"].system.shm_name, self.shm.name)
        self.assertEqual(listed["io"].system.byte_size, self.shm.size)
        with self.assertRaises(AttnServeError) as caught:
            self.client.register_system_region("io", self.shm)
        self.assertEqual(caught.exception.code().name, "ALREADY_EXISTS")

        q = self.fill((1, 8, 1, 16))
        self.client.unregister_region(self.region)
        self.assertNotIn("io", [r.name for r in self.client.list_regions()])
        # Its arrays are ordinary arrays again (sent inline)...
        _, timing = self.client.attend(q, q, q)
        self.assertEqual(timing.q_path, "inline")
        # ...and a reference to it is refused by the server.
        with self.assertRaises(AttnServeError) as caught:
            self.client.attend(TensorRef(self.region, 0, q.shape, "fp16"), q, q)
        self.assertEqual(caught.exception.code().name, "NOT_FOUND")
        self.assertIn("q_ref.region_id", caught.exception.details())

    def test_mistakes_are_refused_naming_the_argument(self):
        q = self.fill((1, 8, 2, 16))
        cases = [
            (dict(out=np.empty(q.shape, np.float16)), "out must lie in a region registered"),
            (dict(out=self.shm.ndarray((1, 8, 2, 8), np.float16)), "of shape (1, 8, 2, 16)"),
            (dict(out=self.shm.ndarray(q.shape, np.float32)), "contiguous fp16"),
            (dict(lse_out=self.shm.ndarray((1, 2, 8), np.float32)), "return_lse=True"),
            (dict(stream=True), "stream=True takes none"),
            (dict(out=TensorRef(self.region, 0, (1, 8, 2, 8), "fp16")), "out has 256 bytes"),
        ]
        for kwargs, message in cases:
            with self.subTest(message):
                with self.assertRaises(ValueError) as caught:
                    self.client.attend(q, q, q, **kwargs)
                self.assertIn(message, str(caught.exception))
        # The server's own checks come back as its errors.
        with self.assertRaises(AttnServeError) as caught:
            self.client.attend(TensorRef(self.region, 8, q.shape, "fp16"), q, q)
        self.assertEqual(caught.exception.code().name, "INVALID_ARGUMENT")
        self.assertIn("q_ref.offset is 8", caught.exception.details())
        with self.assertRaises(AttnServeError) as caught:
            self.client.attend(q, q, q, out=q)  # the output over an input
        self.assertIn("overlaps", caught.exception.details())

    def test_closing_the_client_ends_its_lease(self):
        holder = Client(SERVER.address, transport=self.TRANSPORT)
        region = holder.register_system_region("held", self.shm)
        self.assertEqual([r.name for r in holder.list_regions()], ["held"])
        q = self.fill((1, 8, 1, 16))
        by_ref = TensorRef(region, self.shm.offset_of(q), q.shape, "fp16")
        _, timing = self.client.attend(by_ref, q, q)  # any client may use a region's id
        self.assertEqual(timing.q_path, "system_shm")
        holder.close()

        def refused():
            try:
                self.client.attend(by_ref, q, q)
                return False
            except AttnServeError as error:
                self.assertEqual(error.code().name, "NOT_FOUND")
                return True

        # The server ends the lease when it sees the call cancelled: soon, not at once.
        self.assertTrue(wait_until(refused))


class GrpcioSystemRegionTest(SystemRegionTest):
    TRANSPORT = "grpcio"


class RegionsOffTest(unittest.TestCase):
    def test_a_server_without_the_flag_refuses_saying_so(self):
        with SystemSharedMemory(4096) as shm:
            for transport in ("native", "grpcio"):
                with self.subTest(transport), Client(PLAIN_SERVER.address,
                                                     transport=transport) as client:
                    with self.assertRaises(AttnServeError) as caught:
                        client.register_system_region("x", shm)
                    self.assertEqual(caught.exception.code().name, "FAILED_PRECONDITION")
                    self.assertIn("--allow_shared_memory", caught.exception.details())


class SystemSharedMemoryTest(unittest.TestCase):
    def test_arrays_are_placed_aligned_and_outlive_close(self):
        shm = SystemSharedMemory(4096)
        path = "/dev/shm" + shm.name
        self.assertTrue(os.path.exists(path))
        self.assertEqual(os.stat(path).st_mode & 0o777, 0o600)
        a = shm.ndarray((3,), np.uint8)
        b = shm.ndarray((2, 4), np.float32)
        self.assertEqual((shm.offset_of(a), shm.offset_of(b)), (0, 64))
        self.assertEqual(b.sum(), 0)  # zero-filled
        with self.assertRaises(ValueError):
            shm.ndarray((4096,), np.float16)
        b[...] = 2.0
        shm.close()
        self.assertFalse(os.path.exists(path))
        self.assertEqual(float(b.sum()), 16.0)  # still mapped
        shm.close()  # idempotent
        with self.assertRaises(ValueError):
            shm.ndarray((1,), np.uint8)

    def test_a_process_that_dies_leaves_no_object_behind(self):
        # multiprocessing's resource tracker unlinks what a dead process left.
        with subprocess.Popen([sys.executable, "-c", textwrap.dedent("""
                import os, signal
                from attnserve_client import SystemSharedMemory
                shm = SystemSharedMemory(4096)
                print(shm.name, flush=True)
                os.kill(os.getpid(), signal.SIGKILL)
                """)], stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True) as child:
            name = child.stdout.readline().strip()
            self.assertEqual(child.wait(timeout=60), -signal.SIGKILL)
        self.assertTrue(name.startswith("/attn-py-"), name)
        self.assertTrue(wait_until(lambda: not os.path.exists("/dev/shm" + name)), name)


class TimingPathsTest(unittest.TestCase):
    def test_tensors_sent_inline_read_inline_where_the_server_names_no_path(self):
        # Servers name paths only when a region was used (and older ones never).
        from attnserve_client.attend_call import make_call, path_fields

        q = np.zeros((1, 8, 2, 16), np.float16)
        call = make_call(q, q, q, return_lse=True)
        self.assertEqual(set(path_fields(None, call).values()), {"inline"})
        call.refer("q", "id", 0, q.nbytes)
        self.assertEqual(path_fields((2, 0, 0, 0, 2), call),
                         dict(q_path="system_shm", k_path="inline", v_path="inline",
                              out_path="inline", lse_path="system_shm"))
        no_lse = make_call(q, q, q)
        self.assertEqual(path_fields(None, no_lse)["lse_path"], "unspecified")


class _FakeStorage:
    """What _share_cuda_ returns for a storage at byte 1024 of its block."""

    released = []

    def __init__(self, handle):
        self.handle = handle

    def _share_cuda_(self):
        return (1, self.handle, 4096, 1024, b"/torch_42_7", 3, bytes(64), True)

    @staticmethod
    def _release_ipc_counter_cuda(handle, offset):
        _FakeStorage.released.append((handle, offset))


class CudaIpcTest(unittest.TestCase):
    """The CUDA path as far as a host without a GPU goes."""

    def fake_cuda_tensor(self, torch, handle):
        tensor = torch.tensor_from_bits(np.zeros((1, 8, 2, 16), np.uint16), torch.bfloat16,
                                        device="cuda:1")
        tensor.is_cuda = True
        tensor.is_contiguous = lambda: True
        tensor.data_ptr = lambda: 0x7F0000001040
        tensor.untyped_storage = lambda: _FakeStorage(handle)
        tensor.storage_offset = lambda: 32  # elements
        tensor.element_size = lambda: 2
        tensor.numel = lambda: 256
        return tensor

    def test_torch_handle_formats(self):
        raw = bytes(range(64))
        self.assertEqual(cuda_ipc.ipc_mem_handle(raw), raw)  # torch before 2.2
        for version in (1, 2, 3):
            self.assertEqual(cuda_ipc.ipc_mem_handle(bytes([version]) + b"c" + raw), raw)
        with self.assertRaises(ValueError) as caught:
            cuda_ipc.ipc_mem_handle(b"\x02e" + bytes(80))
        self.assertIn("expandable_segments:False", str(caught.exception))
        with self.assertRaises(ValueError):
            cuda_ipc.ipc_mem_handle(bytes(10))

    def test_export_points_at_the_tensor_in_its_block_and_gives_the_counter_back(self):
        raw = bytes(range(64))
        with fake_torch.installed() as torch:
            torch.UntypedStorage = _FakeStorage
            _FakeStorage.released.clear()
            export = cuda_ipc.export(self.fake_cuda_tensor(torch, b"\x02c" + raw))
        self.assertEqual(export.ipc_handle, raw)
        self.assertEqual((export.device, export.offset, export.byte_size, export.address),
                         (1, 1024 + 32 * 2, 512, 0x7F0000001040))
        self.assertEqual(_FakeStorage.released, [(b"/torch_42_7", 3)])

    def test_export_refuses_what_cannot_be_a_region(self):
        with fake_torch.installed() as torch:
            torch.UntypedStorage = _FakeStorage
            cpu = torch.tensor_from_bits(np.zeros(4, np.uint16), torch.float16)
            with self.assertRaises(TypeError):
                cuda_ipc.export(cpu)
            odd = self.fake_cuda_tensor(torch, bytes(64))
            odd.data_ptr = lambda: 0x7F0000001042
            with self.assertRaises(ValueError) as caught:
                cuda_ipc.export(odd)
            self.assertIn("multiple of 16", str(caught.exception))

    def test_a_cpu_server_refuses_cuda_regions_saying_why(self):
        with fake_torch.installed() as torch:
            torch.UntypedStorage = _FakeStorage
            for transport in ("native", "grpcio"):
                with self.subTest(transport), Client(SERVER.address, transport=transport) as c:
                    with self.assertRaises(AttnServeError) as caught:
                        c.register_cuda_tensor("gpu", self.fake_cuda_tensor(torch, bytes(64)))
                    self.assertEqual(caught.exception.code().name, "FAILED_PRECONDITION")
                    self.assertIn("cuda regions need the CUDA backend",
                                  caught.exception.details())


class CliSharedMemoryTest(unittest.TestCase):
    def run_cli(self, *args):
        return subprocess.run([os.environ["ATTN_CLI_BINARY"], *args], capture_output=True,
                              text=True, timeout=120)

    def test_attend_through_system_shared_memory_checks_and_shows_the_paths(self):
        result = self.run_cli("attend", f"--address={SERVER.address}", "--shape=1,40,2,16",
                              "--kv_shape=1,56,1,16", "--causal", "--lse",
                              "--shared_memory=system", "--check", "--repeat=2")
        self.assertEqual(result.returncode, 0, result.stdout + result.stderr)
        self.assertIn("PASS", result.stdout)
        self.assertIn("tensors: q system_shm, k system_shm, v system_shm, out system_shm, "
                      "lse system_shm", result.stdout)
        result = self.run_cli("attend", f"--address={SERVER.address}", "--shape=1,16,2,16")
        self.assertEqual(result.returncode, 0, result.stderr)
        self.assertIn("tensors: q inline", result.stdout)

    def test_a_server_without_the_flag_fails_the_call_saying_why(self):
        result = self.run_cli("attend", f"--address={PLAIN_SERVER.address}", "--shape=1,16,2,16",
                              "--shared_memory=system")
        self.assertEqual(result.returncode, 1, result.stdout)
        self.assertIn("--allow_shared_memory", result.stderr)
        self.assertEqual(self.run_cli("attend", "--shared_memory=carrier-pigeon").returncode, 2)


if __name__ == "__main__":
    unittest.main(verbosity=2)
