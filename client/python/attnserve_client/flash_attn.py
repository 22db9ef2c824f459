"""FlashAttention-2's Python API, computed by an attnserve server.

    import torch
    from attnserve_client import Client
    from attnserve_client.flash_attn import flash_attn_func, flash_attn_varlen_func

    client = Client("gpu-node:50051")
    out = flash_attn_func(q, k, v, causal=True, client=client)
    out, lse = flash_attn_func(q, k, v, window_size=(256, 0), return_lse=True, client=client)

The functions take and return torch tensors in FA2's conventions: q (B, Sq,
Hq, D), k and v (B, Sk, Hkv, D) with Hkv dividing Hq, bf16 or fp16, on the
CPU or a CUDA device; the output has q's shape, dtype and device, and with
return_lse the log-sum-exp comes back as float32 (B, Hq, Sq) ((Hq, total_q)
for varlen), on the same device. Tensors cross to host memory and back
(the server computes; nothing runs on the local GPU). Without `client=` the
calls use set_default_client()'s client, else one connected to
$ATTNSERVE_ADDRESS (default localhost:50051) on first use.

torch is optional for the package and never imported by it: the functions
take torch from the tensors they are given (TypeError for anything else).
"""

import os
import threading

from . import torch_tensors
from .client import Client

_default_client = None
_default_lock = threading.Lock()


def set_default_client(client):
    """The Client that calls without `client=` use (None: connect on first use)."""
    global _default_client
    with _default_lock:
        _default_client = client


def _client(client):
    global _default_client
    if client is not None:
        return client
    with _default_lock:
        if _default_client is None:
            _default_client = Client(os.environ.get("ATTNSERVE_ADDRESS", "localhost:50051"))
        return _default_client


def _run(q, k, v, dropout_p, return_lse, client, **kwargs):
    if dropout_p:
        raise ValueError("attnserve computes inference attention: dropout_p must be 0")
    if torch_tensors.torch_of(q) is None:
        raise TypeError(f"q must be a torch.Tensor (PyTorch), got {type(q).__name__}; "
                        "Client.attend takes NumPy arrays")
    # Client.attend converts the tensors and returns them on q's device.
    result = _client(client).attend(q, k, v, return_lse=return_lse, **kwargs)
    return result[:2] if return_lse else result[0]


def flash_attn_func(q, k, v, dropout_p=0.0, softmax_scale=None, causal=False,
                    window_size=(-1, -1), return_lse=False, *, client=None, kernel="",
                    timeout=None):
    """FA2's flash_attn_func on the server: out (B, Sq, Hq, D), or (out, lse)
    with return_lse (lse float32 (B, Hq, Sq)).

    q: (B, Sq, Hq, D); k, v: (B, Sk, Hkv, D), Hkv dividing Hq (GQA/MQA).
    causal: aligned to the bottom right when Sq != Sk. window_size: (left,
    right), -1 = unbounded. softmax_scale: default 1/sqrt(D). dropout_p must
    be 0.
    """
    return _run(q, k, v, dropout_p, return_lse, client, softmax_scale=softmax_scale,
                causal=causal, window_size=window_size, kernel=kernel, timeout=timeout)


def flash_attn_varlen_func(q, k, v, cu_seqlens_q, cu_seqlens_k, max_seqlen_q, max_seqlen_k,
                           dropout_p=0.0, softmax_scale=None, causal=False,
                           window_size=(-1, -1), return_lse=False, *, client=None, kernel="",
                           timeout=None):
    """FA2's flash_attn_varlen_func on the server: out (total_q, Hq, D), or
    (out, lse) with return_lse (lse float32 (Hq, total_q)).

    q: (total_q, Hq, D); k, v: (total_k, Hkv, D); cu_seqlens_q/_k: int32
    (batch + 1,) offsets (torch tensors on any device, or sequences).
    """
    return _run(q, k, v, dropout_p, return_lse, client, softmax_scale=softmax_scale,
                causal=causal, window_size=window_size, kernel=kernel, timeout=timeout,
                cu_seqlens_q=cu_seqlens_q, cu_seqlens_k=cu_seqlens_k,
                max_seqlen_q=max_seqlen_q, max_seqlen_k=max_seqlen_k)
