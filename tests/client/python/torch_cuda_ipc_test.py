"""torch CUDA tensors as CUDA IPC regions, on a GPU host (ctest label gpu).

Skips, saying why, without torch or a CUDA device. Otherwise:

* the handle and offset that Client.register_cuda_tensor sends
  (cuda_ipc.export) open in another process (cudaIpcOpenMemHandle through
  the cudart that torch loaded) onto exactly the tensor's bytes, for a tensor
  that starts inside its allocator block;
* against a CUDA attn_server (ATTN_SERVER_BINARY, started here with
  --allow_shared_memory; skipped when it is a CPU-only build): q, k, v and
  the output in registered CUDA tensors go by reference (paths cuda_ipc),
  the output is written into the given tensor in place, and it matches
  torch's own attention and the same call with the tensors sent inline;
  through both transports; a region that does not start at a multiple of
  16 bytes is refused.

ctest runs it with ATTN_PYTHON (Debian's python3, usually without torch);
with the interpreter that has torch:
  PYTHONPATH=<build>/client/python ATTN_SERVER_BINARY=<build>/server/attn_server \
      python3 tests/client/python/torch_cuda_ipc_test.py
"""

import os
import subprocess
import sys
import textwrap
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

try:
    import torch
except ImportError:  # CI: no torch
    torch = None

CUDA = torch is not None and torch.cuda.is_available()
SKIP = None if CUDA else ("torch is not installed" if torch is None else
                          "torch sees no CUDA device")
SEED = int.from_bytes(os.urandom(4), "little")


# The child: opens the handle through the cudart torch loaded and prints the
# bytes at the offset (hex).
_READER = textwrap.dedent("""
    import ctypes, sys, torch
    torch.cuda.init()
    handle, device, offset, size = bytes.fromhex(sys.argv[1]), *map(int, sys.argv[2:5])
    cudart = None
    for name in ("libcudart.so." + torch.version.cuda.split(".")[0], "libcudart.so"):
        try:
            cudart = ctypes.CDLL(name)
            break
        except OSError:
            pass
    assert cudart is not None, "no libcudart"
    assert cudart.cudaSetDevice(device) == 0
    class Handle(ctypes.Structure):
        _fields_ = [("reserved", ctypes.c_char * 64)]
    base = ctypes.c_void_p()
    error = cudart.cudaIpcOpenMemHandle(ctypes.byref(base), Handle.from_buffer_copy(handle), 1)
    assert error == 0, f"cudaIpcOpenMemHandle: {error}"
    host = (ctypes.c_char * size)()
    cudart.cudaMemcpy.argtypes = [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int]
    assert cudart.cudaMemcpy(host, base.value + offset, size, 2) == 0  # device to host
    print(bytes(host).hex())
    cudart.cudaIpcCloseMemHandle(base)
""")


@unittest.skipIf(SKIP, SKIP)
class CudaIpcExportTest(unittest.TestCase):
    def test_the_handle_opens_on_the_tensors_bytes_in_another_process(self):
        from attnserve_client import cuda_ipc

        generator = torch.Generator(device="cuda").manual_seed(SEED)
        block = torch.randint(0, 1 << 15, (1 << 16,), dtype=torch.int16, device="cuda",
                              generator=generator)
        tensor = block[4096:4096 + 3000]  # starts 8 KiB into its storage
        torch.cuda.synchronize()
        export = cuda_ipc.export(tensor)
        self.assertEqual(len(export.ipc_handle), 64)
        self.assertEqual(export.byte_size, 6000)
        self.assertEqual(export.address, tensor.data_ptr())
        child = subprocess.run(
            [sys.executable, "-c", _READER, export.ipc_handle.hex(), str(export.device),
             str(export.offset), str(export.byte_size)],
            capture_output=True, text=True, timeout=120)
        self.assertEqual(child.returncode, 0, child.stderr)
        self.assertEqual(bytes.fromhex(child.stdout.strip()),
                         tensor.cpu().numpy().tobytes(), f"seed {SEED}")


@unittest.skipIf(SKIP, SKIP)
class CudaRegionAttendTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        if not os.environ.get("ATTN_SERVER_BINARY"):
            raise unittest.SkipTest("ATTN_SERVER_BINARY is not set (ctest sets it)")
        from attn_test_server import ServerProcess
        from attnserve_client import Client

        cls.server = ServerProcess(["--allow_shared_memory"]).__enter__()
        with Client(cls.server.address) as client:
            backend = client.server_info().backend
        if backend != "cuda":
            cls.server.__exit__(None, None, None)
            raise unittest.SkipTest(f"{os.environ['ATTN_SERVER_BINARY']} runs the {backend} "
                                    "backend (a build without CUDA)")

    @classmethod
    def tearDownClass(cls):
        cls.server.__exit__(None, None, None)

    def check_transport(self, transport):
        from attnserve_client import Client

        generator = torch.Generator(device="cuda").manual_seed(SEED)
        B, S, H, Hkv, D = 2, 256, 8, 2, 128
        # One buffer holds q, k, v and the output, registered once.
        buffer = torch.empty(B * S * (H + 2 * Hkv + H) * D, dtype=torch.bfloat16, device="cuda")
        sizes = [B * S * H * D, B * S * Hkv * D, B * S * Hkv * D, B * S * H * D]
        q, k, v, out = torch.split(buffer, sizes)
        q, out = q.view(B, S, H, D), out.view(B, S, H, D)
        k, v = k.view(B, S, Hkv, D), v.view(B, S, Hkv, D)
        for t in (q, k, v):
            t.copy_(torch.randn(t.shape, device="cuda", generator=generator))
        out.fill_(float("nan"))
        with Client(self.server.address, transport=transport) as client:
            client.register_cuda_tensor("io", buffer)
            result, timing = client.attend(q, k, v, causal=True, out=out)
            self.assertIs(result, out)
            self.assertEqual((timing.q_path, timing.k_path, timing.v_path, timing.out_path),
                             ("cuda_ipc",) * 4)
            inline, inline_timing = client.attend(q.clone(), k.clone(), v.clone(), causal=True)
            self.assertEqual(inline_timing.q_path, "inline")
        self.assertTrue(torch.equal(out, inline), f"seed {SEED}")
        reference = torch.nn.functional.scaled_dot_product_attention(
            q.transpose(1, 2).float(), k.repeat_interleave(H // Hkv, 2).transpose(1, 2).float(),
            v.repeat_interleave(H // Hkv, 2).transpose(1, 2).float(), is_causal=True)
        reference = reference.transpose(1, 2)
        error = (out.float() - reference).norm() / reference.norm()
        self.assertLess(float(error), 1e-2, f"seed {SEED}")

    def test_native(self):
        self.check_transport("native")

    def test_a_region_not_16_byte_aligned_is_refused(self):
        # The kernel would use it in place with 16-byte loads and fault.
        from attnserve_client import AttnServeError, Client, cuda_ipc

        tensor = torch.zeros(4096, dtype=torch.bfloat16, device="cuda")
        export = cuda_ipc.export(tensor)
        with Client(self.server.address) as client:
            with self.assertRaises(AttnServeError) as caught:
                client.register_cuda_region("odd", export.ipc_handle, export.device,
                                            export.offset + 8, export.byte_size - 8)
        self.assertEqual(caught.exception.code().name, "INVALID_ARGUMENT")
        self.assertIn("cuda.offset is", caught.exception.details())

    def test_grpcio(self):
        try:
            import grpc  # noqa: F401
        except ImportError:
            self.skipTest("grpcio is not installed")
        self.check_transport("grpcio")


if __name__ == "__main__":
    unittest.main(verbosity=2)
