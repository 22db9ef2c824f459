"""NumPy arrays <-> attnserve's wire tensors (raw little-endian 16-bit).

attnserve computes on fp16 or bf16 elements laid out [batch, seq_len,
num_heads, head_dim], contiguous. These helpers turn NumPy arrays into that
form and back:

* ``np.float16`` arrays are fp16 as they are.
* ``ml_dtypes.bfloat16`` arrays (JAX, TensorFlow, Keras) are bf16 as they are;
  so are 2-byte void arrays (``|V2``), which is what ``np.load`` returns for a
  bfloat16 array saved with ``np.save``.
* ``np.uint16``/``np.int16`` arrays are taken as raw bit patterns of the
  dtype the caller names (how PyTorch users often export bf16).
* float32/float64 arrays are rounded (to nearest even, as the GPU does) to
  the dtype the caller names.

ml_dtypes is optional: without it bf16 results come back as float32 (exact)
or raw bits.
"""

import numpy as np

FP16 = "fp16"
BF16 = "bf16"

_ALIASES = {"fp16": FP16, "float16": FP16, "half": FP16, "bf16": BF16, "bfloat16": BF16}

try:  # optional: JAX/TensorFlow's bfloat16 NumPy dtype
    import ml_dtypes as _ml_dtypes

    BFLOAT16 = np.dtype(_ml_dtypes.bfloat16)
except ImportError:  # pragma: no cover - depends on the environment
    BFLOAT16 = None


def parse_dtype(name):
    """'fp16'/'float16'/'half' or 'bf16'/'bfloat16' -> FP16 or BF16."""
    try:
        return _ALIASES[str(name).lower()]
    except KeyError:
        raise ValueError(f"dtype must be fp16 or bf16, got {name!r}") from None


def float_to_bf16_bits(values):
    """float array -> uint16 bf16 bit patterns, rounded to nearest even."""
    bits = np.ascontiguousarray(values, dtype=np.float32).view(np.uint32).astype(np.uint64)
    rounded = ((bits + 0x7FFF + ((bits >> 16) & 1)) >> 16).astype(np.uint16)
    nan = np.isnan(values)
    if nan.any():  # keep NaNs NaN (quiet) instead of rounding into infinity
        rounded[nan] = ((bits[nan] >> 16) | 0x40).astype(np.uint16)
    return rounded


def bf16_bits_to_float(bits):
    """uint16 bf16 bit patterns -> float32 (exact)."""
    return (np.asarray(bits, dtype=np.uint16).astype(np.uint32) << 16).view(np.float32)


def _is_bf16_dtype(dtype):
    return (BFLOAT16 is not None and dtype == BFLOAT16) or dtype.name == "bfloat16" or (
        dtype.kind == "V" and dtype.itemsize == 2 and dtype.fields is None
    )


def to_wire(array, dtype=None, ndim=4):
    """Returns (wire dtype, shape, contiguous little-endian 16-bit array).

    `dtype` (fp16/bf16) is required for float32/float64 and integer-bit
    inputs, and must agree with fp16/bf16 inputs when given. `ndim` is 4
    ([batch, seq_len, num_heads, head_dim]) or 3 (packed varlen tokens,
    [total, num_heads, head_dim]).
    """
    array = np.asarray(array)
    want = parse_dtype(dtype) if dtype is not None else None
    if array.ndim != ndim:
        layout = ("[batch, seq_len, num_heads, head_dim]" if ndim == 4
                  else "[total_tokens, num_heads, head_dim] (varlen)")
        raise ValueError(f"tensors are {ndim}-D {layout}; got shape {array.shape}")
    if array.dtype == np.float16:
        have = FP16
    elif _is_bf16_dtype(array.dtype):
        have = BF16
    else:
        have = None
    if have is not None:
        if want is not None and want != have:
            raise ValueError(f"array is {have} but dtype={dtype!r} was given")
        bits = np.ascontiguousarray(array).view(np.uint16)
        return have, array.shape, bits.astype("<u2", copy=False)
    if want is None:
        raise ValueError(
            f"array dtype {array.dtype} is not fp16 or bf16; pass dtype='fp16' or 'bf16' to convert"
        )
    if array.dtype in (np.uint16, np.int16):
        bits = np.ascontiguousarray(array).view(np.uint16)
    elif array.dtype.kind == "f":
        if want == FP16:
            bits = np.ascontiguousarray(array, dtype=np.float16).view(np.uint16)
        else:
            bits = float_to_bf16_bits(array)
    else:
        raise ValueError(f"unsupported array dtype {array.dtype}")
    return want, array.shape, bits.astype("<u2", copy=False)


def holds_wire(dtype, wire_dtype):
    """True when arrays of `dtype` hold `wire_dtype` elements as they are: the
    types an output buffer may have (raw uint16/int16 bits hold either)."""
    dtype = np.dtype(dtype)
    if dtype in (np.uint16, np.int16):
        return True
    return dtype == np.float16 if wire_dtype == FP16 else _is_bf16_dtype(dtype)


def _keeps_bits(dtype):
    """True when outputs for inputs of `dtype` are the 16-bit wire elements themselves."""
    return dtype == np.float16 or _is_bf16_dtype(dtype) or dtype in (np.uint16, np.int16)


def bits_as_output(bits, wire_dtype, like):
    """The uint16 output `bits` (an array the caller hands over) typed after the input `like`.

    16-bit float inputs (float16, bfloat16, V2) give the same dtype back, as a
    view of `bits` (no copy); integer-bit inputs give uint16 bits; float32/
    float64 inputs give float32 (a conversion).
    """
    like = np.dtype(like)
    if _keeps_bits(like):
        return bits.view(like)
    if wire_dtype == FP16:
        return bits.view(np.float16).astype(np.float32)
    return bf16_bits_to_float(bits)


def from_wire(data, wire_dtype, shape, like):
    """The output bytes as an array shaped `shape`, typed after the input `like`
    (bits_as_output; copied, since `data` is read-only)."""
    bits = np.frombuffer(data, dtype="<u2").reshape(shape)
    if _keeps_bits(np.dtype(like)):
        bits = bits.copy()
    return bits_as_output(bits, wire_dtype, like)


def to_float64(bits, wire_dtype):
    """Wire bits -> float64 values (for references and checks)."""
    bits = np.asarray(bits).view(np.uint16)
    if wire_dtype == FP16:
        return bits.view(np.float16).astype(np.float64)
    return bf16_bits_to_float(bits).astype(np.float64)
