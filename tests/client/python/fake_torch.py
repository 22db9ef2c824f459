"""A stand-in for the few torch APIs attnserve_client uses, for hosts without
PyTorch: tensors backed by NumPy arrays, with a device label.

What it keeps of torch's behaviour, so the conversion logic is tested rather
than assumed: `.numpy()` refuses a tensor that is not on the CPU (as torch
does for CUDA tensors), `.view(dtype)` only reinterprets elements of the same
size, `from_numpy` shares memory, and `.to(device)` copies to another device.
bfloat16 elements are stored as their uint16 bit patterns.

    with fake_torch.installed() as torch:
        q = torch.tensor_from_bits(bits, torch.bfloat16, device="cuda:0")
"""

import contextlib
import sys
import types

import numpy as np


class dtype:  # noqa: N801 - torch's name
    def __init__(self, name, storage):
        self.name = name
        self.storage = np.dtype(storage)  # how the elements are held in NumPy

    def __repr__(self):
        return f"torch.{self.name}"


bfloat16 = dtype("bfloat16", np.uint16)
float16 = dtype("float16", np.float16)
float32 = dtype("float32", np.float32)
int16 = dtype("int16", np.int16)
int32 = dtype("int32", np.int32)
_BY_STORAGE = {d.storage: d for d in (float16, float32, int16, int32)}


class Tensor:
    def __init__(self, data, dtype_, device="cpu"):
        self._data = data
        self.dtype = dtype_
        self.device = device
        self.shape = data.shape

    def detach(self):
        return self

    def contiguous(self):
        return Tensor(np.ascontiguousarray(self._data), self.dtype, self.device)

    def cpu(self):
        return self.to("cpu")

    def to(self, device):
        if device == self.device:
            return self
        return Tensor(self._data.copy(), self.dtype, device)

    def view(self, dtype_):
        if dtype_.storage.itemsize != self.dtype.storage.itemsize:
            raise RuntimeError(f"view {self.dtype} as {dtype_}: element sizes differ")
        return Tensor(self._data.view(dtype_.storage), dtype_, self.device)

    def numpy(self):
        if self.device != "cpu":
            raise TypeError(f"can't convert {self.device} device type tensor to numpy")
        return self._data


def from_numpy(array):
    return Tensor(array, _BY_STORAGE[array.dtype])


def tensor_from_bits(bits, dtype_, device="cpu"):
    """A tensor of dtype_ (bfloat16 or float16) whose elements have these uint16 bits."""
    return Tensor(np.asarray(bits, np.uint16).view(dtype_.storage).copy(), dtype_, device)


@contextlib.contextmanager
def installed():
    """This module as sys.modules['torch'] for the duration (a real torch is
    put back after)."""
    module = types.ModuleType("torch")
    for name in ("dtype", "bfloat16", "float16", "float32", "int16", "int32", "Tensor",
                 "from_numpy", "tensor_from_bits"):
        setattr(module, name, globals()[name])
    saved = sys.modules.get("torch")
    sys.modules["torch"] = module
    try:
        yield module
    finally:
        if saved is None:
            del sys.modules["torch"]
        else:
            sys.modules["torch"] = saved
