"""A float64 NumPy attention reference, for checking results on the client."""

import numpy as np


def attention_reference(q, k, v, softmax_scale=None):
    """softmax(q @ k^T * scale) @ v per (batch, head), in float64.

    q, k, v: float arrays [batch, seq_len, num_heads, head_dim] (use
    tensors.to_float64 for wire bits). Scale defaults to 1/sqrt(head_dim).
    Memory is O(batch * heads * seq_len^2): meant for test-sized shapes.
    """
    q, k, v = (np.asarray(t, dtype=np.float64).transpose(0, 2, 1, 3) for t in (q, k, v))
    scale = 1.0 / np.sqrt(q.shape[-1]) if softmax_scale is None else float(softmax_scale)
    scores = q @ k.transpose(0, 1, 3, 2) * scale
    scores -= scores.max(axis=-1, keepdims=True)
    weights = np.exp(scores)
    weights /= weights.sum(axis=-1, keepdims=True)
    return (weights @ v).transpose(0, 2, 1, 3)


def relative_l2_error(out, ref):
    """||out - ref||_2 / ||ref||_2 over all elements."""
    out = np.asarray(out, dtype=np.float64)
    ref = np.asarray(ref, dtype=np.float64)
    return float(np.linalg.norm(out - ref) / np.linalg.norm(ref))
