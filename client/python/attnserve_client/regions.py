"""Registered shared-memory regions on the client's side, and tensors in them.

A Region is what Client.register_system_region / register_cuda_region /
register_cuda_tensor return: the server's id for some memory both processes
can reach, and (when this process has that memory mapped) where it starts
here. RegionTable finds the region an array or tensor lies in, so that
Client.attend can send it by reference (attention.proto's TensorRef)
instead of its bytes. TensorRef names a tensor in a region explicitly, for
memory this process has no array of.
"""

import dataclasses
import threading

import numpy as np

from . import tensors

SYSTEM = "system"
CUDA = "cuda"
_ITEM_BYTES = {tensors.FP16: 2, tensors.BF16: 2, "float32": 4}


@dataclasses.dataclass(frozen=True, eq=False)
class Region:
    """A region registered in this client's lease."""

    name: str
    region_id: str     # what the server's TensorRef.region_id names
    kind: str          # SYSTEM or CUDA
    byte_size: int
    address: int = None  # its first byte in this process (None: not mapped here)
    device: int = None   # CUDA regions: the CUDA device ordinal
    memory: object = None  # what backs it here (SystemSharedMemory, a torch tensor), kept
                           # alive while the region is registered

    def contains(self, address, nbytes, device=None):
        """True when [address, address + nbytes) lies inside this region (on `device`)."""
        if self.address is None or device != self.device:
            return False
        return self.address <= address and address + nbytes <= self.address + self.byte_size

    def ndarray(self, offset, shape, dtype):
        """A NumPy view of a system region's bytes at `offset` (ValueError when not mapped here)."""
        memory = self.memory
        if self.kind != SYSTEM or self.address is None or not hasattr(memory, "ndarray"):
            raise ValueError(f"region '{self.name}' has no memory mapped in this process")
        return memory.ndarray(shape, dtype, offset=self.address - memory.address + offset)


@dataclasses.dataclass(frozen=True)
class TensorRef:
    """A tensor of `shape` and `dtype` at byte `offset` of `region`, in the
    layout the inline tensor would have ([batch, seq_len, heads, head_dim],
    contiguous). dtype: 'fp16' or 'bf16' for q, k, v and out; 'float32' for
    an LSE. offset must be a multiple of 16."""

    region: Region
    offset: int
    shape: tuple
    dtype: str = tensors.BF16

    def __post_init__(self):
        dtype = "float32" if str(self.dtype) == "float32" else tensors.parse_dtype(self.dtype)
        object.__setattr__(self, "dtype", dtype)
        object.__setattr__(self, "shape", tuple(int(d) for d in self.shape))
        object.__setattr__(self, "offset", int(self.offset))

    @property
    def byte_size(self):
        return int(np.prod(self.shape, dtype=np.int64)) * _ITEM_BYTES[self.dtype]

    def wire(self):
        """(region_id, offset, byte_size): what the transports send."""
        return (self.region.region_id, self.offset, self.byte_size)


class RegionTable:
    """This client's registered regions, by name, and lookup by address. Thread-safe."""

    def __init__(self):
        self._lock = threading.Lock()
        self._by_name = {}

    def add(self, region):
        with self._lock:
            self._by_name[region.name] = region

    def remove(self, name):
        with self._lock:
            return self._by_name.pop(name, None)

    def clear(self):
        with self._lock:
            self._by_name.clear()

    def find(self, address, nbytes, device=None):
        """(region, offset) of the region holding [address, address + nbytes), or None."""
        with self._lock:
            regions = list(self._by_name.values())
        for region in regions:
            if region.contains(address, nbytes, device):
                return region, address - region.address
        return None
