"""A float64 NumPy attention reference, for checking results on the client.

It follows FlashAttention-2's flash_attn_func / flash_attn_varlen_func:
grouped-query attention (query head h reads key/value head h // (Hq // Hkv)),
causal and sliding-window masks aligned to the bottom right when the lengths
differ, and a row that sees no key gets output 0 and LSE -inf.
"""

import numpy as np


def _visible(seqlen_q, seqlen_k, causal, window_size):
    """[Sq, Sk] boolean mask of the keys each query row sees."""
    left, right = (int(w) for w in window_size)
    if causal:
        right = 0
    i = np.arange(seqlen_q)[:, None]
    j = np.arange(seqlen_k)[None, :]
    diagonal = i + seqlen_k - seqlen_q
    mask = np.ones((seqlen_q, seqlen_k), dtype=bool)
    if left >= 0:
        mask &= j >= diagonal - left
    if right >= 0:
        mask &= j <= diagonal + right
    return mask


def attention_reference(q, k, v, softmax_scale=None, causal=False, window_size=(-1, -1),
                        return_lse=False):
    """softmax(q @ k^T * scale) @ v per (batch, head), in float64.

    q: float array [batch, seq_len, num_heads, head_dim]; k, v: [batch,
    kv_seq_len, kv_num_heads, head_dim] (use tensors.to_float64 for wire
    bits). Scale defaults to 1/sqrt(head_dim). Returns out [B, S, H, D] and,
    with return_lse, also lse [B, H, S]. Memory is O(B * H * S * Skv): meant
    for test-sized shapes.
    """
    q, k, v = (np.asarray(t, dtype=np.float64).transpose(0, 2, 1, 3) for t in (q, k, v))
    group = q.shape[1] // k.shape[1]
    if group > 1:
        k, v = (np.repeat(t, group, axis=1) for t in (k, v))
    scale = 1.0 / np.sqrt(q.shape[-1]) if softmax_scale is None else float(softmax_scale)
    scores = q @ k.transpose(0, 1, 3, 2) * scale
    mask = _visible(q.shape[2], k.shape[2], causal, window_size)
    scores = np.where(mask, scores, -np.inf)
    row_max = scores.max(axis=-1, keepdims=True)
    empty = ~np.isfinite(row_max)
    weights = np.exp(scores - np.where(empty, 0.0, row_max))
    sums = weights.sum(axis=-1, keepdims=True)
    out = np.where(empty, 0.0, weights @ v / np.where(empty, 1.0, sums)).transpose(0, 2, 1, 3)
    if not return_lse:
        return out
    with np.errstate(divide="ignore"):
        lse = np.where(empty, -np.inf, row_max + np.log(np.where(empty, 1.0, sums)))[..., 0]
    return out, lse


def varlen_attention_reference(q, k, v, cu_seqlens_q, cu_seqlens_k, softmax_scale=None,
                               causal=False, window_size=(-1, -1), return_lse=False):
    """attention_reference over packed sequences (flash_attn_varlen_func).

    q: [total_q, num_heads, head_dim]; k, v: [total_k, kv_num_heads,
    head_dim]; sequence b owns tokens cu_seqlens[b] .. cu_seqlens[b + 1] - 1.
    Returns out [total_q, H, D] and, with return_lse, lse [H, total_q].
    """
    q, k, v = (np.asarray(t, dtype=np.float64) for t in (q, k, v))
    out = np.zeros(q.shape)
    lse = np.full((q.shape[1], q.shape[0]), -np.inf)
    for b in range(len(cu_seqlens_q) - 1):
        q0, q1 = int(cu_seqlens_q[b]), int(cu_seqlens_q[b + 1])
        k0, k1 = int(cu_seqlens_k[b]), int(cu_seqlens_k[b + 1])
        if q1 == q0:
            continue
        if k1 == k0:  # no key at all: output 0, LSE -inf
            continue
        o, l = attention_reference(q[None, q0:q1], k[None, k0:k1], v[None, k0:k1],
                                   softmax_scale, causal, window_size, return_lse=True)
        out[q0:q1] = o[0]
        lse[:, q0:q1] = l[0]
    return (out, lse) if return_lse else out


def relative_l2_error(out, ref):
    """||out - ref||_2 / ||ref||_2 over all elements."""
    out = np.asarray(out, dtype=np.float64)
    ref = np.asarray(ref, dtype=np.float64)
    return float(np.linalg.norm(out - ref) / np.linalg.norm(ref))
