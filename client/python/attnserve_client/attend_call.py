"""One attend() call, checked and in wire form, for either transport.

Client.attend turns its NumPy arguments into an AttendCall (tensors.to_wire:
16-bit contiguous arrays are viewed, not copied); the transports send it,
grpcio as protobuf messages, native as pointers into these arrays.
"""

import dataclasses

import numpy as np

from . import tensors


@dataclasses.dataclass
class AttendCall:
    wire_dtype: str      # tensors.FP16 or tensors.BF16
    bits: tuple          # q, k, v: contiguous little-endian uint16 arrays
    shape: tuple         # q's (and out's): 4-D, or 3-D packed with varlen
    like: np.dtype       # q's dtype: decides the output's (tensors.bits_as_output)
    batch: int
    seq_len: int         # longest sequence with varlen
    kv_seq_len: int
    heads: int
    kv_heads: int
    head_dim: int
    lse_shape: tuple
    cu_seqlens_q: np.ndarray = None  # int32, varlen only
    cu_seqlens_k: np.ndarray = None
    kernel: str = ""
    softmax_scale: float = None
    causal: bool = False
    window_left: int = -1
    window_right: int = -1
    return_lse: bool = False
    request_id: str = ""

    @property
    def varlen(self):
        return self.cu_seqlens_q is not None

    @property
    def request_bytes(self):
        return sum(b.nbytes for b in self.bits)


def make_call(q, k, v, *, dtype=None, kernel="", softmax_scale=None, request_id="", causal=False,
              window_size=(-1, -1), return_lse=False, cu_seqlens_q=None, cu_seqlens_k=None,
              max_seqlen_q=None, max_seqlen_k=None):
    """Client.attend's arguments as an AttendCall; ValueError naming what does not fit."""
    varlen = cu_seqlens_q is not None or cu_seqlens_k is not None
    if varlen and (cu_seqlens_q is None or cu_seqlens_k is None):
        raise ValueError("give both cu_seqlens_q and cu_seqlens_k (varlen), or neither")
    ndim = 3 if varlen else 4
    wire = [tensors.to_wire(t, dtype, ndim=ndim) for t in (q, k, v)]
    wire_dtype, shape = wire[0][0], tuple(wire[0][1])
    kv_shape = tuple(wire[1][1])
    if min(shape) < 1 or min(kv_shape) < 1:
        raise ValueError(f"every dimension must be >= 1, got q {shape}, k {kv_shape}")
    for name, (d, s, _) in zip("kv", wire[1:]):
        if d != wire_dtype or tuple(s) != kv_shape:
            raise ValueError(f"{name} is {d} {tuple(s)}, k is {wire[1][0]} {kv_shape}, "
                             f"q is {wire_dtype}")
    heads, head_dim = shape[-2], shape[-1]
    kv_heads = kv_shape[-2]
    if kv_shape[-1] != head_dim or heads % kv_heads:
        raise ValueError(f"k/v {kv_shape} do not go with q {shape}: head_dim must agree and "
                         "kv_num_heads divide num_heads")
    cu_q = cu_k = None
    if varlen:
        cu_q = _offsets(cu_seqlens_q, "cu_seqlens_q", shape[0])
        cu_k = _offsets(cu_seqlens_k, "cu_seqlens_k", kv_shape[0])
        if len(cu_q) != len(cu_k):
            raise ValueError(f"cu_seqlens_q has {len(cu_q)} offsets, cu_seqlens_k {len(cu_k)}")
        batch = len(cu_q) - 1
        seq_len = int(max_seqlen_q) if max_seqlen_q else int(np.diff(cu_q).max())
        kv_seq_len = int(max_seqlen_k) if max_seqlen_k else int(np.diff(cu_k).max())
        lse_shape = (heads, shape[0])
    else:
        if kv_shape[0] != shape[0]:
            raise ValueError(f"k/v batch {kv_shape[0]} differs from q's {shape[0]}")
        batch, seq_len, kv_seq_len = shape[0], shape[1], kv_shape[1]
        lse_shape = (shape[0], heads, shape[1])
    window_left, window_right = (int(w) for w in window_size)
    return AttendCall(
        wire_dtype=wire_dtype, bits=tuple(w[2] for w in wire), shape=shape,
        like=np.asarray(q).dtype, batch=batch, seq_len=seq_len, kv_seq_len=kv_seq_len,
        heads=heads, kv_heads=kv_heads, head_dim=head_dim, lse_shape=lse_shape,
        cu_seqlens_q=cu_q, cu_seqlens_k=cu_k, kernel=kernel,
        softmax_scale=None if softmax_scale is None else float(softmax_scale),
        causal=bool(causal), window_left=window_left, window_right=window_right,
        return_lse=bool(return_lse), request_id=request_id)


def _offsets(values, name, total):
    """cu_seqlens as an int32 array: batch + 1 non-decreasing offsets from 0 to `total`."""
    offsets = np.asarray(values.cpu() if hasattr(values, "cpu") else values).astype(np.int64)
    if (offsets.ndim != 1 or offsets.size < 2 or offsets[0] != 0 or np.any(np.diff(offsets) < 0)
            or offsets[-1] != total):
        raise ValueError(f"{name} must be batch + 1 non-decreasing offsets from 0 to the "
                         f"{total} packed tokens, got {offsets.tolist()}")
    return np.ascontiguousarray(offsets, dtype=np.int32)
