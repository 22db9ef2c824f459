"""torch CUDA tensors as CUDA IPC regions (attention.proto's CudaRegion).

A CUDA attn_server on the same host and GPU opens the caller's GPU memory
from a cudaIpcMemHandle_t (cudaIpcOpenMemHandle) and its kernel reads the
inputs and writes the outputs there, in place: no copy through the host.

PyTorch does not expose cudaIpcGetMemHandle itself, but its own
multiprocessing path does: UntypedStorage._share_cuda_() returns
(device, handle, storage_size_bytes, storage_offset_bytes,
ref_counter_handle, ref_counter_offset, event_handle, event_sync_required)
(torch/csrc/StorageSharing.cpp). The handle is that of the caching
allocator's whole block (the cudaMalloc'd segment), which is what the
server's cudaIpcOpenMemHandle maps, so the tensor's bytes start at
storage_offset_bytes + tensor.storage_offset() * element_size in it. Since
torch 2.2 the handle is versioned (c10's CUDACachingAllocator
shareIpcHandle): a version byte, a type byte ('c' for cudaMalloc memory,
then the 64-byte cudaIpcMemHandle_t; 'e' for expandable segments, which have
no such handle), where older torch gives the 64 bytes alone.

_share_cuda_ also puts the storage behind a reference counter that a torch
consumer decrements when it lets go; the server is no torch consumer, so
export() gives that count back at once. Otherwise the memory would never
return to the allocator once the tensor is freed. The Region keeps the
tensor alive while it is registered instead.

torch is taken from the tensor (sys.modules), never imported here.
"""

import dataclasses

from . import torch_tensors

IPC_HANDLE_BYTES = 64  # sizeof(cudaIpcMemHandle_t)
_CUDA_MALLOC = ord("c")
_EXPANDABLE_SEGMENT = ord("e")
ALIGNMENT = 16  # the kernel's vector loads need the tensor's start aligned so


@dataclasses.dataclass(frozen=True)
class CudaExport:
    """What RegisterRegion's CudaRegion needs for one tensor's bytes."""

    device: int        # CUDA ordinal in this process
    ipc_handle: bytes  # cudaIpcMemHandle_t of the allocation
    offset: int        # of the tensor's first byte in the allocation
    byte_size: int
    address: int       # the tensor's data_ptr() in this process


def ipc_mem_handle(handle):
    """The cudaIpcMemHandle_t inside one of torch's storage handles (see the module's doc)."""
    handle = bytes(handle)
    if len(handle) == IPC_HANDLE_BYTES:
        return handle  # torch before versioned handles
    if len(handle) == 2 + IPC_HANDLE_BYTES and handle[1] == _CUDA_MALLOC:
        return handle[2:]
    if len(handle) >= 2 and handle[1] == _EXPANDABLE_SEGMENT:
        raise ValueError(
            "the tensor lives in an expandable segment (PYTORCH_CUDA_ALLOC_CONF="
            "expandable_segments:True), which has no cudaIpcMemHandle_t; allocate it with "
            "expandable_segments:False to share it with the server")
    raise ValueError(f"unrecognized CUDA IPC handle from torch: {len(handle)} bytes, "
                     f"starting {handle[:2].hex()}")


def export(tensor):
    """The CudaExport of a contiguous torch CUDA tensor's bytes."""
    torch = torch_tensors.torch_of(tensor)
    if torch is None or not getattr(tensor, "is_cuda", False):
        raise TypeError(f"a CUDA region is a torch CUDA tensor, got {type(tensor).__name__}"
                        + (f" on {tensor.device}" if torch is not None else ""))
    if not tensor.is_contiguous():
        raise ValueError("the tensor must be contiguous: a region is one range of bytes")
    if tensor.data_ptr() % ALIGNMENT:
        raise ValueError(f"the tensor's data must start at a multiple of {ALIGNMENT} bytes; it "
                         f"is {tensor.data_ptr() % ALIGNMENT} bytes past one (a view at an odd "
                         "offset?)")
    shared = tensor.untyped_storage()._share_cuda_()
    device, handle, _, storage_offset_bytes, ref_counter, ref_counter_offset = shared[:6]
    ipc_handle = ipc_mem_handle(handle)
    torch.UntypedStorage._release_ipc_counter_cuda(ref_counter, ref_counter_offset)
    element = tensor.element_size()
    return CudaExport(device=int(device), ipc_handle=ipc_handle,
                      offset=int(storage_offset_bytes) + tensor.storage_offset() * element,
                      byte_size=tensor.numel() * element, address=tensor.data_ptr())


def synchronize(devices):
    """Waits for the work queued on these CUDA devices: the server reads and
    writes region tensors from another process, outside torch's streams."""
    import sys

    torch = sys.modules.get("torch")
    for device in sorted(set(devices)):
        torch.cuda.synchronize(device)
