"""One attend() call, checked and in wire form, for either transport.

Client.attend turns its NumPy arguments into an AttendCall (tensors.to_wire:
16-bit contiguous arrays are viewed, not copied); the transports send it,
grpcio as protobuf messages, native as pointers into these arrays. Tensors
in shared-memory regions travel as references instead (`refs`; their
`bits` entry is None).
"""

import dataclasses

import numpy as np

from . import regions, tensors

# How a tensor travelled (proto TensorPath, by number); Timing.*_path.
TENSOR_PATHS = ("unspecified", "inline", "system_shm", "cuda_ipc")
_PATH_TENSORS = ("q", "k", "v", "out", "lse")


def path_fields(numbers, call=None):
    """Timing's q_path .. lse_path from the five TensorPath numbers (None: unknown).

    The server names the paths only when a tensor used a region; with `call`,
    a path it left unspecified is "inline" for a tensor the call sent inline
    (as the C++ client reports it).
    """
    numbers = numbers or (0,) * len(_PATH_TENSORS)
    fields = {f"{name}_path": TENSOR_PATHS[n] if 0 <= n < len(TENSOR_PATHS) else TENSOR_PATHS[0]
              for name, n in zip(_PATH_TENSORS, numbers)}
    if call is not None:
        for name in _PATH_TENSORS:
            sent_inline = name not in call.refs and (name != "lse" or call.return_lse)
            if fields[f"{name}_path"] == TENSOR_PATHS[0] and sent_inline:
                fields[f"{name}_path"] = "inline"
    return fields


@dataclasses.dataclass
class AttendCall:
    wire_dtype: str      # tensors.FP16 or tensors.BF16
    bits: tuple          # q, k, v: contiguous little-endian uint16 arrays (None: by reference)
    shape: tuple         # q's (and out's): 4-D, or 3-D packed with varlen
    kv_shape: tuple      # k's and v's
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
    # Tensors in regions: "q", "k", "v", "out", "lse" -> (region_id, offset, byte_size).
    refs: dict = dataclasses.field(default_factory=dict)

    @property
    def varlen(self):
        return self.cu_seqlens_q is not None

    @property
    def request_bytes(self):
        return sum(b.nbytes for b in self.bits if b is not None)

    @property
    def out_bytes(self):
        return int(np.prod(self.shape)) * 2

    @property
    def lse_bytes(self):
        return int(np.prod(self.lse_shape)) * 4 if self.return_lse else 0

    def refer(self, name, region_id, offset, byte_size):
        """Sends tensor `name` by reference (q, k and v then carry no bits)."""
        self.refs[name] = (region_id, int(offset), int(byte_size))
        if name in ("q", "k", "v"):
            bits = list(self.bits)
            bits["qkv".index(name)] = None
            self.bits = tuple(bits)


def make_call(q, k, v, *, dtype=None, kernel="", softmax_scale=None, request_id="", causal=False,
              window_size=(-1, -1), return_lse=False, cu_seqlens_q=None, cu_seqlens_k=None,
              max_seqlen_q=None, max_seqlen_k=None):
    """Client.attend's arguments as an AttendCall; ValueError naming what does not fit."""
    varlen = cu_seqlens_q is not None or cu_seqlens_k is not None
    if varlen and (cu_seqlens_q is None or cu_seqlens_k is None):
        raise ValueError("give both cu_seqlens_q and cu_seqlens_k (varlen), or neither")
    ndim = 3 if varlen else 4
    wire = [_to_wire(t, dtype, ndim) for t in (q, k, v)]
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
    call = AttendCall(
        wire_dtype=wire_dtype, bits=tuple(w[2] for w in wire), shape=shape, kv_shape=kv_shape,
        like=_output_like(q, wire_dtype), batch=batch, seq_len=seq_len, kv_seq_len=kv_seq_len,
        heads=heads, kv_heads=kv_heads, head_dim=head_dim, lse_shape=lse_shape,
        cu_seqlens_q=cu_q, cu_seqlens_k=cu_k, kernel=kernel,
        softmax_scale=None if softmax_scale is None else float(softmax_scale),
        causal=bool(causal), window_left=window_left, window_right=window_right,
        return_lse=bool(return_lse), request_id=request_id)
    for name, t in zip("qkv", (q, k, v)):
        if isinstance(t, regions.TensorRef):
            call.refer(name, *t.wire())
    return call


def _to_wire(tensor, dtype, ndim):
    """tensors.to_wire, or for a TensorRef its (wire dtype, shape, None)."""
    if not isinstance(tensor, regions.TensorRef):
        return tensors.to_wire(tensor, dtype, ndim=ndim)
    if tensor.dtype not in (tensors.FP16, tensors.BF16):
        raise ValueError(f"a TensorRef input is fp16 or bf16, got {tensor.dtype}")
    if dtype is not None and tensors.parse_dtype(dtype) != tensor.dtype:
        raise ValueError(f"a TensorRef is {tensor.dtype} but dtype={dtype!r} was given")
    if len(tensor.shape) != ndim:
        raise ValueError(f"tensors are {ndim}-D; a TensorRef has shape {tensor.shape}")
    return tensor.dtype, tensor.shape, None


def _output_like(q, wire_dtype):
    """The dtype an inline output comes back as (tensors.bits_as_output): q's, or
    for a TensorRef q its 16-bit type (bf16 as ml_dtypes.bfloat16 when installed,
    else as raw uint16 bits)."""
    if not isinstance(q, regions.TensorRef):
        return np.asarray(q).dtype
    if wire_dtype == tensors.FP16:
        return np.dtype(np.float16)
    return tensors.BFLOAT16 if tensors.BFLOAT16 is not None else np.dtype(np.uint16)


def _offsets(values, name, total):
    """cu_seqlens as an int32 array: batch + 1 non-decreasing offsets from 0 to `total`."""
    offsets = np.asarray(values.cpu() if hasattr(values, "cpu") else values).astype(np.int64)
    if (offsets.ndim != 1 or offsets.size < 2 or offsets[0] != 0 or np.any(np.diff(offsets) < 0)
            or offsets[-1] != total):
        raise ValueError(f"{name} must be batch + 1 non-decreasing offsets from 0 to the "
                         f"{total} packed tokens, got {offsets.tolist()}")
    return np.ascontiguousarray(offsets, dtype=np.int32)
