"""Shared pieces of the GPU benchmark scripts: the ctypes binding of
libattn_c.so (attn/c_api.h), PyTorch SDPA references, and timing.

Timing: CUDA events around each launch, median of `iters` launches after
`warmup`; a short device-side sleep before each timed launch keeps host
launch latency (ctypes or PyTorch dispatch) out of the measurement.
"""
import ctypes
import os
import statistics
import subprocess

import torch
import torch.nn.functional as F
from torch.nn.attention import sdpa_kernel

DTYPES = {"bf16": (torch.bfloat16, 1), "fp16": (torch.float16, 0)}


class KvCache(ctypes.Structure):
    """attn_kv_cache_t (attn/c_api.h)."""
    _fields_ = [("k_cache", ctypes.c_void_p), ("v_cache", ctypes.c_void_p),
                ("cache_seqlens", ctypes.c_void_p), ("block_table", ctypes.c_void_p),
                ("capacity", ctypes.c_int64), ("page_size", ctypes.c_int64),
                ("num_pages", ctypes.c_int64), ("max_pages_per_seq", ctypes.c_int64),
                ("k_new", ctypes.c_void_p), ("v_new", ctypes.c_void_p),
                ("cache_seqlens_host", ctypes.c_void_p), ("block_table_host", ctypes.c_void_p),
                ("cu_seqlens_q_host", ctypes.c_void_p)]


class AttnLib:
    """ctypes binding of attn/c_api.h."""

    def __init__(self, path):
        self.lib = ctypes.CDLL(path)
        self.lib.attn_forward.argtypes = [
            ctypes.c_char_p, ctypes.c_int, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_void_p,
            ctypes.c_void_p, ctypes.c_int64, ctypes.c_int64, ctypes.c_int64, ctypes.c_int64,
            ctypes.c_float, ctypes.c_void_p, ctypes.c_char_p, ctypes.c_size_t]
        self.lib.attn_forward.restype = ctypes.c_int
        self.lib.attn_forward_ex.argtypes = [
            ctypes.c_char_p, ctypes.c_int, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_void_p,
            ctypes.c_void_p, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_void_p,
            ctypes.c_int64, ctypes.c_int64, ctypes.c_int64, ctypes.c_int64, ctypes.c_int64,
            ctypes.c_int64, ctypes.c_int, ctypes.c_int64, ctypes.c_int64, ctypes.c_float,
            ctypes.c_int64, ctypes.c_int64, ctypes.c_void_p, ctypes.c_char_p, ctypes.c_size_t]
        self.lib.attn_forward_ex.restype = ctypes.c_int
        self.lib.attn_forward_split.argtypes = (
            self.lib.attn_forward_ex.argtypes[:21]
            + [ctypes.c_int, ctypes.c_void_p, ctypes.c_int64]
            + self.lib.attn_forward_ex.argtypes[21:])
        self.lib.attn_forward_split.restype = ctypes.c_int
        self.lib.attn_forward_kvcache.argtypes = [
            ctypes.c_char_p, ctypes.c_int, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_void_p,
            ctypes.c_void_p, ctypes.POINTER(KvCache), ctypes.c_int64, ctypes.c_int64,
            ctypes.c_int64, ctypes.c_int64, ctypes.c_int64, ctypes.c_int, ctypes.c_int64,
            ctypes.c_int64, ctypes.c_float, ctypes.c_int64, ctypes.c_int, ctypes.c_void_p,
            ctypes.c_int64, ctypes.c_void_p, ctypes.c_char_p, ctypes.c_size_t]
        self.lib.attn_forward_kvcache.restype = ctypes.c_int
        self.lib.attn_list_kernels.argtypes = [ctypes.c_int, ctypes.c_char_p, ctypes.c_size_t]
        self.lib.attn_list_kernels.restype = ctypes.c_size_t
        self.error = ctypes.create_string_buffer(1024)

    def kernels(self, candidates=False):
        size = self.lib.attn_list_kernels(int(candidates), None, 0)
        buf = ctypes.create_string_buffer(size)
        self.lib.attn_list_kernels(int(candidates), buf, size)
        return [n for n in buf.value.decode().split("\n") if n]

    def forward(self, name, dtype_code, q, k, v, out):
        b, s, h, d = q.shape
        rc = self.lib.attn_forward(
            name.encode(), dtype_code, q.data_ptr(), k.data_ptr(), v.data_ptr(), out.data_ptr(),
            b, s, h, d, 0.0, torch.cuda.current_stream().cuda_stream, self.error, 1024)
        if rc != 0:
            raise RuntimeError(f"{name}: status {rc}: {self.error.value.decode()}")

    def forward_ex(self, name, dtype_code, q, k, v, out, causal=False, window=(-1, -1),
                   lse=None, cu_seqlens_q=None, cu_seqlens_k=None, max_seqlen_q=0,
                   max_seqlen_k=0, workspace=None, num_splits=0):
        """FA2's conventions: q (B, Sq, Hq, D), k/v (B, Sk, Hkv, D); with cu_seqlens
        (int32 CUDA tensors) q is (total_q, Hq, D) and k/v (total_k, Hkv, D).
        workspace: a CUDA tensor the kernel may use for split-KV (attn_forward_split),
        num_splits 0 for the kernel's choice."""
        if cu_seqlens_q is not None:
            total_q, hq, d = q.shape
            total_k, hkv, _ = k.shape
            b, sq, sk = cu_seqlens_q.numel() - 1, max_seqlen_q, max_seqlen_k
            cq, ck = cu_seqlens_q.data_ptr(), cu_seqlens_k.data_ptr()
        else:
            b, sq, hq, d = q.shape
            sk, hkv = k.shape[1], k.shape[2]
            total_q = total_k = 0
            cq = ck = None
        split = () if workspace is None else (num_splits, workspace.data_ptr(),
                                              workspace.numel() * workspace.element_size())
        fn = self.lib.attn_forward_ex if workspace is None else self.lib.attn_forward_split
        rc = fn(
            name.encode(), dtype_code, q.data_ptr(), k.data_ptr(), v.data_ptr(), out.data_ptr(),
            None if lse is None else lse.data_ptr(), cq, ck, b, sq, sk, hq, hkv, d, int(causal),
            window[0], window[1], 0.0, total_q, total_k, *split,
            torch.cuda.current_stream().cuda_stream if q.is_cuda else None, self.error, 1024)
        if rc != 0:
            raise RuntimeError(f"{name}: status {rc}: {self.error.value.decode()}")

    def forward_kvcache(self, name, dtype_code, q, out, k_cache, v_cache, cache_seqlens,
                        block_table=None, k_new=None, v_new=None, causal=False, window=(-1, -1),
                        lse=None, workspace=None, num_splits=0):
        """flash_attn_with_kvcache's conventions: q (B, Sq, Hq, D); k_cache/v_cache
        (B, capacity, Hkv, D), or with block_table (int32 (B, max_pages)) page pools
        (num_pages, page_size, Hkv, D); cache_seqlens int32 (B,); k_new/v_new
        (B, Sq, Hkv, D) are appended at cache_seqlens first. Returns a callable
        that launches it (the arguments bound once, so timing sees the launch)."""
        b, sq, hq, d = q.shape
        cache = KvCache()
        cache.k_cache, cache.v_cache = k_cache.data_ptr(), v_cache.data_ptr()
        cache.cache_seqlens = cache_seqlens.data_ptr()
        if block_table is None:
            cache.capacity = k_cache.shape[1]
        else:
            cache.block_table = block_table.data_ptr()
            cache.num_pages, cache.page_size = k_cache.shape[0], k_cache.shape[1]
            cache.max_pages_per_seq = block_table.shape[1]
        if k_new is not None:
            cache.k_new, cache.v_new = k_new.data_ptr(), v_new.data_ptr()
        hkv = k_cache.shape[2]
        ws = (None, 0) if workspace is None else (workspace.data_ptr(),
                                                  workspace.numel() * workspace.element_size())
        args = (name.encode(), dtype_code, q.data_ptr(), out.data_ptr(),
                None if lse is None else lse.data_ptr(), None, ctypes.byref(cache), b, sq, hq, hkv,
                d, int(causal), window[0], window[1], 0.0, 0, num_splits, *ws,
                torch.cuda.current_stream().cuda_stream, self.error, 1024)

        def run():
            rc = self.lib.attn_forward_kvcache(*args)
            if rc != 0:
                raise RuntimeError(f"{name}: status {rc}: {self.error.value.decode()}")
        return run


def time_ms(fn, warmup, iters):
    for _ in range(warmup):
        fn()
    torch.cuda.synchronize()
    starts = [torch.cuda.Event(enable_timing=True) for _ in range(iters)]
    ends = [torch.cuda.Event(enable_timing=True) for _ in range(iters)]
    for i in range(iters):
        torch.cuda._sleep(200_000)  # ~0.1 ms of device work: the launch below queues behind it
        starts[i].record()
        fn()
        ends[i].record()
    torch.cuda.synchronize()
    return statistics.median(s.elapsed_time(e) for s, e in zip(starts, ends))


def sdpa_fn(backend, q, k, v, causal=False):
    # BSHD storage viewed as (B, H, S, D), as FA2 and cuDNN take strided inputs.
    qt, kt, vt = (x.transpose(1, 2) for x in (q, k, v))
    gqa = {"enable_gqa": True} if q.shape[2] != k.shape[2] else {}

    def run():
        with sdpa_kernel(backend):
            return F.scaled_dot_product_attention(qt, kt, vt, is_causal=causal, **gqa)
    return run


def rel_err(out, ref):
    out, ref = out.float(), ref.float()
    return ((out - ref).norm() / ref.norm()).item()


def hmean(values):
    return len(values) / sum(1.0 / v for v in values)


def git_commit():
    """ATTN_COMMIT when set (a copied tree's git may not be the source's), else git's."""
    if os.environ.get("ATTN_COMMIT"):
        return os.environ["ATTN_COMMIT"]
    try:
        return subprocess.check_output(["git", "rev-parse", "--short", "HEAD"], text=True).strip()
    except (OSError, subprocess.CalledProcessError):
        return os.environ.get("ATTN_COMMIT", "unknown")


