"""Client.attend and flash_attn_func on torch tensors, against the CPU-backend
attn_server, with fake_torch standing in for PyTorch (not installed in CI):
what is tested is the client's conversion (bits to the host and back, dtype,
device, all-or-none torch inputs), not PyTorch itself. python_client_test's
TorchTest runs the same paths on a real torch where one is installed.

Each torch call is compared with the same call on NumPy bit arrays: the CPU
backend with one thread is deterministic, so the results must agree bit for
bit.
"""

import os
import subprocess
import sys
import unittest

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import fake_torch  # noqa: E402
from attn_test_server import ServerProcess  # noqa: E402
from attnserve_client import Client, flash_attn_func, float_to_bf16_bits  # noqa: E402

SEED = int.from_bytes(os.urandom(4), "little")


def setUpModule():
    global SERVER
    SERVER = ServerProcess(["--backend=cpu", "--cpu_threads=1"]).__enter__()


def tearDownModule():
    SERVER.__exit__(None, None, None)


def random_bits(rng, shape, dtype):
    values = rng.standard_normal(shape).astype(np.float32)
    if dtype == "bf16":
        return float_to_bf16_bits(values)
    return values.astype(np.float16).view(np.uint16)


class TorchConversionTest(unittest.TestCase):
    def setUp(self):
        self.rng = np.random.default_rng(SEED)
        self.client = Client(SERVER.address)
        self.addCleanup(self.client.close)
        context = fake_torch.installed()  # (enterContext needs Python 3.11)
        self.torch = context.__enter__()
        self.addCleanup(context.__exit__, None, None, None)

    def inputs(self, dtype, device, q_shape, kv_shape):
        torch_dtype = self.torch.bfloat16 if dtype == "bf16" else self.torch.float16
        bits = [random_bits(self.rng, s, dtype) for s in (q_shape, kv_shape, kv_shape)]
        return bits, [self.torch.tensor_from_bits(b, torch_dtype, device) for b in bits]

    def test_bf16_on_the_cpu_comes_back_as_bf16_on_the_cpu(self):
        bits, (q, k, v) = self.inputs("bf16", "cpu", (2, 16, 4, 32), (2, 16, 4, 32))
        out, timing = self.client.attend(q, k, v, causal=True)
        want, _ = self.client.attend(*bits, dtype="bf16", causal=True)
        self.assertIsInstance(out, self.torch.Tensor, f"seed {SEED}")
        self.assertEqual((out.dtype, out.device, out.shape), (q.dtype, "cpu", q.shape))
        np.testing.assert_array_equal(out.numpy(), want, f"seed {SEED}")
        self.assertEqual(timing.backend, "cpu")

    def test_fp16_on_a_gpu_comes_back_on_that_gpu_with_its_lse(self):
        bits, (q, k, v) = self.inputs("fp16", "cuda:1", (1, 12, 4, 16), (1, 20, 2, 16))
        out, lse, _ = self.client.attend(q, k, v, window_size=(4, 0), return_lse=True)
        want, want_lse, _ = self.client.attend(*bits, dtype="fp16", window_size=(4, 0),
                                               return_lse=True)
        self.assertEqual((out.dtype, out.device, out.shape), (q.dtype, "cuda:1", q.shape))
        self.assertEqual((lse.dtype, lse.device, lse.shape),
                         (self.torch.float32, "cuda:1", (1, 4, 12)))
        np.testing.assert_array_equal(out.cpu().view(self.torch.int16).numpy(),
                                      want.view(np.int16), f"seed {SEED}")
        np.testing.assert_array_equal(lse.cpu().numpy(), want_lse, f"seed {SEED}")

    def test_flash_attn_func_returns_tensors_only(self):
        bits, (q, k, v) = self.inputs("bf16", "cuda:0", (1, 8, 2, 16), (1, 8, 2, 16))
        out = flash_attn_func(q, k, v, causal=True, client=self.client)
        out_lse, lse = flash_attn_func(q, k, v, causal=True, return_lse=True, client=self.client)
        want, _ = self.client.attend(*bits, dtype="bf16", causal=True)
        for got in (out, out_lse):
            self.assertEqual((got.dtype, got.device), (self.torch.bfloat16, "cuda:0"))
            np.testing.assert_array_equal(got.cpu().numpy(), want, f"seed {SEED}")
        self.assertEqual((lse.device, lse.shape), ("cuda:0", (1, 2, 8)))

    def test_refusals_name_the_tensor(self):
        bits, (q, k, v) = self.inputs("bf16", "cpu", (1, 4, 1, 8), (1, 4, 1, 8))
        with self.assertRaisesRegex(TypeError, r"^k must be a torch.Tensor"):
            self.client.attend(q, bits[1], v)
        with self.assertRaisesRegex(TypeError, r"^q must be a torch.Tensor"):
            self.client.attend(bits[0], k, v, dtype="bf16")
        q32 = self.torch.Tensor(np.zeros((1, 4, 1, 8), np.float32), self.torch.float32)
        with self.assertRaisesRegex(TypeError, r"^q is torch.float32; .*bfloat16 or torch.float16"):
            self.client.attend(q32, k, v)
        k16 = self.torch.tensor_from_bits(bits[1], self.torch.float16)
        with self.assertRaisesRegex(ValueError, r"share a dtype"):
            self.client.attend(q, k16, v)
        with self.assertRaisesRegex(ValueError, r"dtype='fp16'"):
            self.client.attend(q, k, v, dtype="fp16")
        with self.assertRaisesRegex(TypeError, r"^q must be a torch.Tensor .*Client.attend"):
            flash_attn_func(*bits, client=self.client)


class NoTorchImportTest(unittest.TestCase):
    def test_the_package_never_imports_torch(self):
        code = ("import sys, numpy as np, attnserve_client as a\n"
                f"c = a.Client({SERVER.address!r})\n"
                "q = np.zeros((1, 4, 1, 8), np.float16)\n"
                "c.attend(q, q, q)\n"
                "sys.exit('torch' in sys.modules)\n")
        result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                                timeout=120)
        self.assertEqual(result.returncode, 0, f"torch was imported, or: {result.stderr}")


if __name__ == "__main__":
    unittest.main(verbosity=2)
