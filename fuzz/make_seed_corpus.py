#!/usr/bin/env python3
"""Writes the fuzz targets' seed corpora, fuzz/corpus/<target>/ (checked in).

    python3 fuzz/make_seed_corpus.py [--out fuzz/corpus]

Each seed is a small, mostly valid input, so the fuzzers start inside the
formats rather than at random bytes; a few seeds are refused on purpose (one
per kind of check). The messages are built with the real attention.proto
(compiled by protoc into a temporary directory), so field numbers live only
there. Needs protoc and python3-protobuf (Debian: protobuf-compiler,
python3-protobuf). Deterministic: the same files on every run.
"""
import argparse
import importlib
import os
import shutil
import struct
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def load_proto():
    """attnserve.v1's Python messages, generated now from the repository's proto."""
    gen = tempfile.mkdtemp(prefix="attn_seed_proto_")
    subprocess.run(["protoc", f"--proto_path={ROOT}/proto", f"--python_out={gen}",
                    f"{ROOT}/proto/attnserve/v1/attention.proto"], check=True)
    sys.path.insert(0, gen)
    return importlib.import_module("attnserve.v1.attention_pb2"), gen


def pattern(n, salt):
    """n deterministic bytes (tensor contents do not matter to the checks)."""
    return bytes((i * 31 + salt) & 0xFF for i in range(n))


def request(pb, shape, dtype=None, kv_seq_len=0, kv_heads=0, tensors=True, **fields):
    """An AttendRequest of shape (batch, seq_len, heads, head_dim) with tensors of
    the right sizes (2-byte elements); `fields` sets the other fields."""
    b, s, h, d = shape
    r = pb.AttendRequest(dtype=dtype if dtype is not None else pb.DTYPE_BFLOAT16)
    r.shape.batch, r.shape.seq_len, r.shape.num_heads, r.shape.head_dim = b, s, h, d
    r.shape.kv_seq_len, r.shape.kv_num_heads = kv_seq_len, kv_heads
    for name, value in fields.items():
        if name.startswith("cu_seqlens"):
            getattr(r, name).extend(value)
        else:
            setattr(r, name, value)
    if tensors:
        cu_q, cu_k = list(r.cu_seqlens_q), list(r.cu_seqlens_k)
        q_tokens = cu_q[-1] if cu_q else b * s
        k_tokens = cu_k[-1] if cu_k else b * (kv_seq_len or s)
        r.q = pattern(q_tokens * h * d * 2, 1)
        r.k = pattern(k_tokens * (kv_heads or h) * d * 2, 2)
        r.v = pattern(k_tokens * (kv_heads or h) * d * 2, 3)
    return r


def request_seeds(pb):
    """name -> AttendRequest: each feature once, and one refusal per check."""
    seeds = {
        "self_attention_bf16": request(pb, (1, 4, 2, 8), request_id="seed-1"),
        "fp16_causal_lse": request(pb, (2, 3, 1, 4), dtype=pb.DTYPE_FLOAT16, causal=True,
                                   return_lse=True),
        "gqa_cross_attention": request(pb, (1, 2, 4, 8), kv_seq_len=5, kv_heads=2,
                                       softmax_scale=0.25, kernel="cpu_reference"),
        "sliding_window": request(pb, (1, 6, 1, 4), window_left=2, window_right=1),
        "varlen": request(pb, (0, 0, 2, 4), cu_seqlens_q=[0, 2, 5], cu_seqlens_k=[0, 3, 4]),
        "refused_dtype": request(pb, (1, 2, 1, 4), dtype=pb.DTYPE_UNSPECIFIED),
        "refused_unknown_kernel": request(pb, (1, 2, 1, 4), kernel="no_such_kernel"),
        "refused_scale": request(pb, (1, 2, 1, 4), softmax_scale=-1.0),
        "refused_scale_nan": request(pb, (1, 2, 1, 4), softmax_scale=float("nan")),
        "refused_gqa_heads": request(pb, (1, 2, 3, 4), kv_heads=2),
        "refused_cu_seqlens": request(pb, (0, 0, 1, 4), cu_seqlens_q=[0, 3, 2],
                                      cu_seqlens_k=[0, 1, 2], tensors=False),
        "refused_request_id": request(pb, (1, 1, 1, 4), request_id="tab\there"),
        "refused_no_shape": pb.AttendRequest(dtype=pb.DTYPE_BFLOAT16),
    }
    short = request(pb, (1, 4, 2, 8))
    short.q = short.q[:-2]
    seeds["refused_byte_count"] = short
    return seeds


def write(directory, name, data):
    os.makedirs(directory, exist_ok=True)
    with open(os.path.join(directory, name), "wb") as f:
        f.write(data)


def attend_request_corpus(pb, out):
    """[slice size - 1][AttendRequest body]: whole bodies, 1-byte and 7-byte slices."""
    for name, r in request_seeds(pb).items():
        body = r.SerializeToString()
        write(out, name, bytes([255]) + body)
    body = request_seeds(pb)["gqa_cross_attention"].SerializeToString()
    write(out, "gqa_cross_attention_1_byte_slices", bytes([0]) + body)
    write(out, "gqa_cross_attention_7_byte_slices", bytes([6]) + body)
    # Protobuf's rules: a repeated singular field (the last wins), an unknown
    # field, and q sent as a varint (an unknown field of another wire type).
    r = request_seeds(pb)["self_attention_bf16"]
    body = r.SerializeToString()
    write(out, "repeated_and_unknown_fields",
          bytes([3]) + body + b"\x0a\x04last" + b"\xa8\x1f\x01" + b"\x30\x05")
    write(out, "truncated", bytes([255]) + body[:-3])


def stream_records(messages):
    """[2-byte little-endian length][AttendStreamRequest] per message."""
    out = b""
    for m in messages:
        data = m.SerializeToString()
        out += struct.pack("<H", len(data)) + data
    return out


def chunks(pb, r, size, order=("q", "k", "v")):
    """The tensors of `r` as TensorChunk messages of at most `size` bytes."""
    names = {"q": pb.TENSOR_Q, "k": pb.TENSOR_K, "v": pb.TENSOR_V}
    for t in order:
        data = getattr(r, t)
        for at in range(0, len(data), size):
            yield pb.AttendStreamRequest(
                chunk=pb.TensorChunk(tensor=names[t], offset=at, data=data[at:at + size]))


def header(pb, r):
    h = pb.AttendRequest()
    h.CopyFrom(r)
    h.ClearField("q")
    h.ClearField("k")
    h.ClearField("v")
    return pb.AttendStreamRequest(header=h)


def attend_stream_corpus(pb, out):
    seeds = request_seeds(pb)
    for name in ("self_attention_bf16", "fp16_causal_lse", "gqa_cross_attention", "varlen"):
        r = seeds[name]
        write(out, name, stream_records([header(pb, r)] + list(chunks(pb, r, 24))))
    r = seeds["self_attention_bf16"]
    write(out, "interleaved_tensors",
          stream_records([header(pb, r)] + list(chunks(pb, r, 64, order=("v", "q", "k")))))
    parts = list(chunks(pb, r, 32))
    write(out, "refused_out_of_order", stream_records([header(pb, r)] + parts[1:]))
    write(out, "refused_repeated_chunk", stream_records([header(pb, r), parts[0], parts[0]]))
    write(out, "refused_chunk_first", stream_records(parts[:2]))
    write(out, "refused_second_header", stream_records([header(pb, r), header(pb, r)]))
    write(out, "refused_tensor_in_header", stream_records([pb.AttendStreamRequest(header=r)]))
    write(out, "refused_output_chunk", stream_records(
        [header(pb, r), pb.AttendStreamRequest(
            chunk=pb.TensorChunk(tensor=pb.TENSOR_OUT, offset=0, data=b"xx"))]))
    write(out, "incomplete", stream_records([header(pb, r)] + parts[:3]))
    write(out, "refused_header", stream_records([header(pb, seeds["refused_gqa_heads"])]))


def npy(descr, shape, data, version=1, fortran=False):
    """A .npy file as numpy.save writes it (header padded to 64 bytes)."""
    text = f"{{'descr': '{descr}', 'fortran_order': {fortran}, 'shape': {tuple(shape)}, }}"
    prefix = 10 if version == 1 else 12
    text += " " * ((64 - (prefix + len(text) + 1) % 64) % 64) + "\n"
    length = struct.pack("<H", len(text)) if version == 1 else struct.pack("<I", len(text))
    return b"\x93NUMPY" + bytes([version, 0]) + length + text.encode() + data


def npy_corpus(out):
    n = 1 * 2 * 2 * 4
    write(out, "fp16_4d", npy("<f2", (1, 2, 2, 4), pattern(n * 2, 1)))
    write(out, "bf16_v2", npy("<V2", (1, 2, 2, 4), pattern(n * 2, 2)))
    write(out, "bf16_by_name", npy("bfloat16", (1, 2, 2, 4), pattern(n * 2, 3)))
    write(out, "fp16_big_endian", npy(">f2", (1, 2, 2, 4), pattern(n * 2, 4)))
    write(out, "fp32", npy("<f4", (1, 2, 2, 4), struct.pack(f"<{n}f", *[i / 7 for i in range(n)])))
    write(out, "fp64_big_endian",
          npy(">f8", (1, 1, 2, 2), struct.pack(">4d", 0.5, -1.25, 3e38, 1e-40)))
    write(out, "int16_bits", npy("<i2", (1, 2, 2, 4), pattern(n * 2, 5)))
    write(out, "packed_3d", npy("<V2", (5, 2, 4), pattern(5 * 2 * 4 * 2, 6)))
    write(out, "version_2", npy("<f2", (1, 1, 1, 4), pattern(8, 7), version=2))
    write(out, "fortran_order", npy("<f2", (1, 1, 2, 2), pattern(8, 8), fortran=True))
    write(out, "one_dimension", npy("<f4", (3,), pattern(12, 9)))
    write(out, "zero_size", npy("<f2", (1, 0, 2, 4), b""))
    # Large dimensions (no element: one is 0), for the size arithmetic.
    write(out, "huge_dimensions", npy("<f2", (2**40, 0, 2**31, 7), b""))
    write(out, "refused_short_data", npy("<f2", (1, 2, 2, 4), pattern(n * 2 - 1, 10)))
    write(out, "refused_structured", b"\x93NUMPY\x01\x00\x2a\x00"
          b"{'descr': [('a', '<f4')], 'shape': (1,), }\n")


def tuning_corpus(out):
    with open(os.path.join(ROOT, "kernels/tuning/tuned_configs.tsv"), "rb") as f:
        write(out, "tuned_configs_tsv", f.read())
    write(out, "two_devices_crlf",
          b"# comment\r\nNVIDIA A100-SXM4-80GB\tk07/128x64_w4\r\n\r\n"
          b"NVIDIA GeForce RTX 3090\tk07/64x64_w4\tmeasured by hand\r\n")
    write(out, "later_line_wins", b"dev\tk07/a\ndev\tk07/b\tnewer\n")
    write(out, "refused_one_field", b"NVIDIA H200\n")
    write(out, "refused_four_fields", b"dev\tk07/a\tnote\textra\n")
    write(out, "refused_empty_device", b"\tk07/a\n")


def session_corpus(out):
    # One byte picks each call (% 6: open, step, step, fork, truncate,
    # close), the next bytes its arguments (session_registry_fuzzer.cc).
    open_grown, open_reserved = bytes([0, 40, 0]), bytes([0, 90, 1])
    step = lambda layer, n, ok=1: bytes([1, layer, 0, 0, n, ok])  # noqa: E731
    write(out, "prefill_decode", open_grown + step(0, 20) + step(1, 20) + step(0, 1) + step(1, 1))
    write(out, "fork_then_append", open_grown + step(0, 20) + step(1, 20) + bytes([3, 0])
          + bytes([1, 0, 0, 1, 5, 1]) + bytes([1, 1, 0, 1, 5, 1]))
    write(out, "truncate_shared_page", open_grown + step(0, 20) + step(1, 20) + bytes([3, 0])
          + bytes([4, 1, 7]) + bytes([1, 0, 0, 1, 3, 1]))
    write(out, "failed_step_and_full_pool", open_reserved + open_reserved + open_grown
              + step(0, 39, 0) + step(0, 39) + bytes([5, 0]))
    write(out, "two_sessions_one_call", open_grown + open_grown
          + bytes([1, 0, 1, 0, 9, 1, 13, 1]) + bytes([1, 1, 1, 0, 9, 1, 13, 1]))


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", default=os.path.join(ROOT, "fuzz", "corpus"))
    args = parser.parse_args()
    pb, gen = load_proto()
    try:
        for target in ("attend_request_fuzzer", "attend_stream_fuzzer", "npy_fuzzer",
                       "tuning_table_fuzzer", "session_registry_fuzzer"):
            shutil.rmtree(os.path.join(args.out, target), ignore_errors=True)
        attend_request_corpus(pb, os.path.join(args.out, "attend_request_fuzzer"))
        attend_stream_corpus(pb, os.path.join(args.out, "attend_stream_fuzzer"))
        npy_corpus(os.path.join(args.out, "npy_fuzzer"))
        tuning_corpus(os.path.join(args.out, "tuning_table_fuzzer"))
        session_corpus(os.path.join(args.out, "session_registry_fuzzer"))
    finally:
        shutil.rmtree(gen, ignore_errors=True)


if __name__ == "__main__":
    main()
