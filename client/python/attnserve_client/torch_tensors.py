"""torch tensors <-> the NumPy bit arrays the client sends and receives.

torch is optional and never imported here: a caller holding a torch tensor
has already imported torch, so it is taken from sys.modules. Only bf16 and
fp16 tensors are accepted (the service's dtypes; no silent rounding). They
go to host memory as raw 16-bit patterns, and results come back as tensors of
the input's dtype on the input's device (CPU or CUDA).
"""

import sys

import numpy as np

_WIRE_NAMES = {"bfloat16": "bf16", "float16": "fp16"}  # torch dtype name -> wire dtype


def torch_of(value):
    """The torch module when `value` is a torch.Tensor, else None."""
    torch = sys.modules.get("torch")
    if torch is not None and isinstance(value, torch.Tensor):
        return torch
    return None


def wire_dtype(tensor, name):
    """The wire dtype (fp16/bf16) of a torch.float16/bfloat16 tensor; TypeError otherwise."""
    if torch_of(tensor) is None:
        raise TypeError(f"{name} must be a torch.Tensor, got {type(tensor).__name__}")
    wire = _WIRE_NAMES.get(str(tensor.dtype).replace("torch.", ""))
    if wire is None:
        raise TypeError(f"{name} is {tensor.dtype}; torch tensors must be torch.bfloat16 or "
                        "torch.float16")
    return wire


def to_bits(tensor, name):
    """(uint16 NumPy bit patterns on the host, wire dtype) of a bf16/fp16 tensor."""
    wire = wire_dtype(tensor, name)
    bits = tensor.detach().contiguous().cpu().view(torch_of(tensor).int16).numpy().view(np.uint16)
    return bits, wire


def from_bits(bits, like):
    """uint16 bit patterns as a tensor of `like`'s dtype on `like`'s device."""
    torch = torch_of(like)
    host = torch.from_numpy(np.ascontiguousarray(bits).view(np.int16)).view(like.dtype)
    return host.to(like.device)


def to_device(array, like):
    """A NumPy array (the float32 LSE) as a tensor on `like`'s device."""
    return torch_of(like).from_numpy(np.ascontiguousarray(array)).to(like.device)
