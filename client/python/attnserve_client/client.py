"""attnserve's Python client: remote FlashAttention on NumPy arrays or torch tensors.

    from attnserve_client import Client

    with Client("gpu-node:50051") as client:
        out, timing = client.attend(q, k, v)     # q, k, v: [B, S, H, D]
        print(timing)                            # server and client breakdown

Messages may be up to 2 GiB - 1 each way (gRPC's default receive limit of
4 MiB is raised), and requests larger than the server's message limit go
over the chunked AttendStream RPC automatically. A failed call raises
AttnServeError, a grpc.RpcError with code() and details(); a missed deadline
raises its subclass AttnServeTimeout, also a TimeoutError; an unreachable
server raises AttnServeConnectionError, also a ConnectionError, after
`connect_timeout` seconds.
"""

import dataclasses
import time

import grpc
import numpy as np

from . import health, tensors, torch_tensors
from attnserve.v1 import attention_pb2 as pb
from attnserve.v1 import attention_pb2_grpc as pb_grpc

MAX_MESSAGE_BYTES = 2**31 - 1
_FALLBACK_STREAM_THRESHOLD = 64 << 20  # when the server's limit is unknown
_MESSAGE_SLACK = 4096  # header fields and framing under a message limit
_ATTEND_METHOD = "/attnserve.v1.Attention/Attend"
_TENSOR_FIELDS = ((6, pb.TENSOR_Q), (7, pb.TENSOR_K), (8, pb.TENSOR_V))


class AttnServeError(grpc.RpcError):
    """A failed call, caught as grpc.RpcError too: code() is the grpc.StatusCode,
    details() the server's message, as on the errors gRPC raises itself."""

    def __init__(self, rpc, address, code, details):
        self.rpc = rpc
        self.address = address
        self._code = code
        self._details = details
        super().__init__(f"{rpc} to {address}: {code.name}: {details}")

    def code(self):
        return self._code

    def details(self):
        return self._details


class AttnServeTimeout(AttnServeError, TimeoutError):
    """The call's deadline passed (DEADLINE_EXCEEDED): catch it as TimeoutError."""


class AttnServeConnectionError(AttnServeError, ConnectionError):
    """Nothing answered at the address within connect_timeout (UNAVAILABLE)."""


def _rpc_error(rpc, address, code, details):
    """The AttnServeError (or its subclass for the code) of a failed call."""
    if code == grpc.StatusCode.DEADLINE_EXCEEDED:
        return AttnServeTimeout(rpc, address, code, details)
    return AttnServeError(rpc, address, code, details)


@dataclasses.dataclass(frozen=True)
class Timing:
    """Where one call's time went, in nanoseconds.

    Server fields come from the response (the server's clock); client fields
    are measured here. marshal + network + server total + unmarshal make up
    the round trip.
    """

    receive_ns: int = 0  # AttendStream: the server's header-to-last-chunk time
    decode_ns: int = 0
    queue_ns: int = 0
    h2d_ns: int = 0
    kernel_ns: int = 0
    d2h_ns: int = 0
    total_ns: int = 0
    marshal_ns: int = 0  # building the request bytes
    unmarshal_ns: int = 0  # parsing the response into the output array
    round_trip_ns: int = 0  # attend() call to result
    upload_ns: int = 0  # streamed calls: until the last request chunk was taken
    streamed: bool = False
    request_id: str = ""
    kernel: str = ""
    backend: str = ""
    device: str = ""
    kernel_tflops: float = 0.0

    @property
    def other_ns(self):
        """Server time outside the named phases."""
        parts = self.receive_ns + self.decode_ns + self.queue_ns + self.h2d_ns + self.kernel_ns + self.d2h_ns
        return max(0, self.total_ns - parts)

    @property
    def network_ns(self):
        """Round trip minus client (un)marshal and the server's total."""
        return max(0, self.round_trip_ns - self.marshal_ns - self.unmarshal_ns - self.total_ns)

    def __str__(self):
        rows = [
            ("client marshal", self.marshal_ns),
            ("network + gRPC", self.network_ns),
            ("server receive", self.receive_ns),
            ("server decode", self.decode_ns),
            ("server queue", self.queue_ns),
            ("server H2D", self.h2d_ns),
            ("server kernel", self.kernel_ns),
            ("server D2H", self.d2h_ns),
            ("server other", self.other_ns),
            ("client unmarshal", self.unmarshal_ns),
            ("round trip", self.round_trip_ns),
        ]
        head = (
            f"kernel {self.kernel} on {self.backend} ({self.device}), request {self.request_id}, "
            f"{'streamed' if self.streamed else 'unary'}"
        )
        return "\n".join([head] + [f"  {name:<18} {ns / 1e6:10.3f} ms" for name, ns in rows])


def _read_file(path):
    with open(path, "rb") as f:
        return f.read()


class Client:
    """A connection to one attnserve server. Thread-safe; reuse it."""

    def __init__(
        self,
        address="localhost:50051",
        *,
        timeout=60.0,
        connect_timeout=5.0,
        tls=False,
        root_certificates=None,
        certificate_chain=None,
        private_key=None,
        server_name=None,
        max_message_bytes=MAX_MESSAGE_BYTES,
        stream_threshold_bytes=None,
        stream_chunk_bytes=4 << 20,
        metadata=(),
        fetch_server_info=True,
        load_balancing_policy=None,
    ):
        """Connects to `address` (host:port or a gRPC target).

        timeout: default deadline of each call, in seconds.
        connect_timeout: AttnServeConnectionError (a ConnectionError) when the
            server is not ready by then.
        tls / root_certificates / certificate_chain / private_key: TLS (paths
            to PEM files; the last two for mutual TLS); server_name overrides
            the name checked in the server's certificate.
        max_message_bytes: send and receive limit (default: gRPC's maximum).
        stream_threshold_bytes: stream requests larger than this; None = the
            server's max_message_bytes (fetched at connect).
        metadata: (key, value) pairs sent with every call.
        load_balancing_policy: e.g. 'round_robin' across a dns:/// target's
            addresses; None = gRPC's default (pick_first).
        """
        self.address = address
        self.timeout = timeout
        self._metadata = tuple(metadata)
        self._chunk_bytes = int(stream_chunk_bytes)
        options = [
            ("grpc.max_send_message_length", int(max_message_bytes)),
            ("grpc.max_receive_message_length", int(max_message_bytes)),
            ("grpc.primary_user_agent", "attnserve-python-client"),
        ]
        if load_balancing_policy:
            options.append(("grpc.lb_policy_name", load_balancing_policy))
        tls = tls or bool(root_certificates or certificate_chain)
        if tls:
            if server_name:
                options.append(("grpc.ssl_target_name_override", server_name))
            credentials = grpc.ssl_channel_credentials(
                root_certificates=_read_file(root_certificates) if root_certificates else None,
                private_key=_read_file(private_key) if private_key else None,
                certificate_chain=_read_file(certificate_chain) if certificate_chain else None,
            )
            self._channel = grpc.secure_channel(address, credentials, options=options)
        else:
            self._channel = grpc.insecure_channel(address, options=options)
        try:
            grpc.channel_ready_future(self._channel).result(timeout=connect_timeout)
        except grpc.FutureTimeoutError:
            self._channel.close()
            raise AttnServeConnectionError(
                "connect", address, grpc.StatusCode.UNAVAILABLE,
                f"nothing answered within {connect_timeout:g} s: is attn_server running there?"
            ) from None
        self._stub = pb_grpc.AttentionStub(self._channel)
        self._attend_raw = self._channel.unary_unary(_ATTEND_METHOD)  # bytes in, bytes out
        self._health_check = self._channel.unary_unary(health.CHECK_METHOD)

        self.info = self.server_info() if fetch_server_info else None
        if stream_threshold_bytes is None:
            limit = self.info.limits.max_message_bytes if self.info is not None else 0
            threshold = limit - _MESSAGE_SLACK if limit > 0 else _FALLBACK_STREAM_THRESHOLD
            stream_threshold_bytes = min(threshold, int(max_message_bytes) - _MESSAGE_SLACK)
        self.stream_threshold_bytes = int(stream_threshold_bytes)

    def close(self):
        self._channel.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def _call(self, rpc, fn, *args, **kwargs):
        try:
            return fn(*args, metadata=self._metadata, **kwargs)
        except grpc.RpcError as error:
            raise _rpc_error(rpc, self.address, error.code(), error.details()) from None

    # --- queries -----------------------------------------------------------

    def list_kernels(self):
        """The server's kernels (KernelDescriptor messages), in ladder order."""
        response = self._call("ListKernels", self._stub.ListKernels, pb.ListKernelsRequest(),
                              timeout=self.timeout)
        return list(response.kernels)

    def server_info(self):
        """The ServerInfo message: version, backend, devices, limits."""
        return self._call("GetServerInfo", self._stub.GetServerInfo, pb.GetServerInfoRequest(),
                          timeout=self.timeout)

    def stats(self):
        """The ServerStats message: cumulative counters since the server started."""
        return self._call("GetStats", self._stub.GetStats, pb.GetStatsRequest(),
                          timeout=self.timeout)

    def health(self, service=""):
        """grpc.health.v1 status name: 'SERVING', 'NOT_SERVING', 'SERVICE_UNKNOWN', ..."""
        try:
            raw = self._call("Health.Check", self._health_check, health.encode_request(service),
                             timeout=self.timeout)
        except AttnServeError as error:
            if error.code() == grpc.StatusCode.NOT_FOUND:
                return "SERVICE_UNKNOWN"
            raise
        return health.STATUS_NAMES.get(health.decode_response(raw), "UNKNOWN")

    # --- attention ---------------------------------------------------------

    def attend(self, q, k, v, *, dtype=None, kernel="", softmax_scale=None, request_id="",
               timeout=None, stream=None, causal=False, window_size=(-1, -1), return_lse=False,
               cu_seqlens_q=None, cu_seqlens_k=None, max_seqlen_q=None, max_seqlen_k=None):
        """Runs attention on the server; returns (out, Timing), or (out, lse, Timing)
        with return_lse. The call is FlashAttention-2's flash_attn_func (or, with
        cu_seqlens, flash_attn_varlen_func).

        q: 4-D [batch, seq_len, num_heads, head_dim]; k, v: [batch, kv_seq_len,
            kv_num_heads, head_dim], kv_num_heads dividing num_heads (grouped-query
            attention). Elements: float16, bfloat16 (ml_dtypes, or 2-byte void as
            np.load returns it), raw uint16/int16 bits with `dtype`, or
            float32/float64 with `dtype` ('fp16' or 'bf16'; rounded to nearest even).
        out: q's shape; same dtype as q for 16-bit inputs, float32 for float inputs.
        causal: causal mask aligned to the bottom right (query i sees keys
            j <= i + kv_seq_len - seq_len).
        window_size: (left, right) sliding window; -1 = unbounded on that side.
        return_lse: also return the log-sum-exp of every query row, float32
            [batch, num_heads, seq_len] (varlen: [num_heads, total_q]); -inf for a
            row that sees no key.
        cu_seqlens_q, cu_seqlens_k: varlen (both or neither): int32 token offsets
            (batch + 1 each); q, k, v are then packed 3-D [total, heads, head_dim].
            max_seqlen_q / max_seqlen_k: the longest sequences (None: derived).
        kernel: kernel name (list_kernels()); '' = the server's default.
        softmax_scale: multiplies q @ k^T; None = 1/sqrt(head_dim).
        stream: True/False forces AttendStream/Attend; None picks by size.

        torch tensors (torch.bfloat16 or torch.float16, on the CPU or a CUDA
        device; q, k and v all torch or none) go through host memory, and then
        out (and lse) come back as torch tensors on q's device.
        """
        start = time.perf_counter_ns()
        torch_like = None
        if any(torch_tensors.torch_of(t) is not None for t in (q, k, v)):
            torch_like = q
            q, k, v, dtype = _torch_bits(q, k, v, dtype)
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
        tensor_shape = pb.TensorShape(num_heads=heads, head_dim=head_dim)
        if varlen:
            cu_q = _offsets(cu_seqlens_q, "cu_seqlens_q", shape[0])
            cu_k = _offsets(cu_seqlens_k, "cu_seqlens_k", kv_shape[0])
            if len(cu_q) != len(cu_k):
                raise ValueError(f"cu_seqlens_q has {len(cu_q)} offsets, cu_seqlens_k {len(cu_k)}")
            batch = len(cu_q) - 1
            tensor_shape.batch = batch
            tensor_shape.seq_len = int(max_seqlen_q) if max_seqlen_q else int(np.diff(cu_q).max())
            kv_len = int(max_seqlen_k) if max_seqlen_k else int(np.diff(cu_k).max())
            tensor_shape.kv_seq_len = kv_len
            lse_shape = (heads, shape[0])
        else:
            if kv_shape[0] != shape[0]:
                raise ValueError(f"k/v batch {kv_shape[0]} differs from q's {shape[0]}")
            tensor_shape.batch, tensor_shape.seq_len = shape[0], shape[1]
            if kv_shape[1] != shape[1]:
                tensor_shape.kv_seq_len = kv_shape[1]
            lse_shape = (shape[0], heads, shape[1])
        if kv_heads != heads:
            tensor_shape.kv_num_heads = kv_heads
        header = pb.AttendRequest(
            request_id=request_id,
            dtype=pb.DTYPE_FLOAT16 if wire_dtype == tensors.FP16 else pb.DTYPE_BFLOAT16,
            shape=tensor_shape,
            kernel=kernel,
            causal=bool(causal),
            return_lse=bool(return_lse),
        )
        if softmax_scale is not None:
            header.softmax_scale = float(softmax_scale)
        window_left, window_right = (int(w) for w in window_size)
        if window_left != -1:
            header.window_left = window_left
        if window_right != -1:
            header.window_right = window_right
        if varlen:
            header.cu_seqlens_q.extend(int(x) for x in cu_q)
            header.cu_seqlens_k.extend(int(x) for x in cu_k)
        bits = [w[2] for w in wire]
        if stream is None:
            size = header.ByteSize() + sum(b.nbytes + 16 for b in bits)
            stream = size > self.stream_threshold_bytes
        timeout = self.timeout if timeout is None else timeout
        if stream:
            response, out_bytes, lse_bytes, client = self._attend_stream(header, bits, timeout,
                                                                         start)
        else:
            response, out_bytes, lse_bytes, client = self._attend_unary(header, bits, timeout,
                                                                        start)

        unmarshal_start = time.perf_counter_ns()
        expected = int(np.prod(shape)) * 2
        if (response.dtype != header.dtype or response.shape.num_heads != heads
                or response.shape.head_dim != head_dim or response.shape.batch != header.shape.batch):
            raise AttnServeError("Attend", self.address, grpc.StatusCode.INTERNAL,
                                 "response shape or dtype differs from the request")
        if len(out_bytes) != expected:
            raise AttnServeError("Attend", self.address, grpc.StatusCode.INTERNAL,
                                 f"response has {len(out_bytes)} output bytes, expected {expected}")
        expected_lse = int(np.prod(lse_shape)) * 4 if return_lse else 0
        if len(lse_bytes) != expected_lse:
            raise AttnServeError("Attend", self.address, grpc.StatusCode.INTERNAL,
                                 f"response has {len(lse_bytes)} LSE bytes, expected {expected_lse}")
        out = tensors.from_wire(out_bytes, wire_dtype, shape, np.asarray(q).dtype)
        lse = np.frombuffer(lse_bytes, dtype="<f4").reshape(lse_shape).astype(np.float32) \
            if return_lse else None
        if torch_like is not None:
            out = torch_tensors.from_bits(out, torch_like)
            lse = torch_tensors.to_device(lse, torch_like) if return_lse else None
        end = time.perf_counter_ns()
        t = response.timing
        timing = Timing(
            receive_ns=t.receive_ns, decode_ns=t.decode_ns, queue_ns=t.queue_ns, h2d_ns=t.h2d_ns, kernel_ns=t.kernel_ns,
            d2h_ns=t.d2h_ns, total_ns=t.total_ns,
            marshal_ns=client["marshal_ns"],
            unmarshal_ns=client["unmarshal_ns"] + end - unmarshal_start,
            round_trip_ns=end - start, upload_ns=client.get("upload_ns", 0), streamed=stream,
            request_id=response.request_id, kernel=response.kernel, backend=response.backend,
            device=response.device, kernel_tflops=response.kernel_tflops,
        )
        if return_lse:
            return out, lse, timing
        return out, timing

    def _attend_unary(self, header, bits, timeout, start):
        # The request is serialized here (header, then q, k, v appended as
        # length-delimited fields 6-8: the same bytes protobuf would write),
        # so each tensor is copied once, and marshal time is measurable.
        parts = [header.SerializeToString()]
        for (field, _), array in zip(_TENSOR_FIELDS, bits):
            view = memoryview(array.reshape(-1).view(np.uint8))
            parts.append(bytes([field << 3 | 2]) + health.encode_varint(view.nbytes))
            parts.append(view)
        request = b"".join(parts)
        marshal_ns = time.perf_counter_ns() - start
        raw = self._call("Attend", self._attend_raw, request, timeout=timeout)
        unmarshal_start = time.perf_counter_ns()
        response = pb.AttendResponse.FromString(raw)
        out = response.out
        return response, out, response.lse, {
            "marshal_ns": marshal_ns, "unmarshal_ns": time.perf_counter_ns() - unmarshal_start}

    def _attend_stream(self, header, bits, timeout, start):
        client = {"marshal_ns": 0, "unmarshal_ns": 0}
        chunk = self._chunk_bytes

        def requests():
            t0 = time.perf_counter_ns()
            message = pb.AttendStreamRequest(header=header)
            client["marshal_ns"] += time.perf_counter_ns() - t0
            yield message
            for (_, tensor), array in zip(_TENSOR_FIELDS, bits):
                view = memoryview(array.reshape(-1).view(np.uint8))
                for offset in range(0, view.nbytes, chunk):
                    t0 = time.perf_counter_ns()
                    message = pb.AttendStreamRequest(chunk=pb.TensorChunk(
                        tensor=tensor, offset=offset, data=bytes(view[offset:offset + chunk])))
                    client["marshal_ns"] += time.perf_counter_ns() - t0
                    yield message
            client["upload_ns"] = time.perf_counter_ns() - start

        try:
            responses = self._stub.AttendStream(requests(), timeout=timeout,
                                                metadata=self._metadata)
            header_response, out, lse = None, bytearray(), bytearray()
            for message in responses:
                t0 = time.perf_counter_ns()
                if header_response is None:
                    if not message.HasField("header"):
                        raise AttnServeError("AttendStream", self.address,
                                             grpc.StatusCode.INTERNAL,
                                             "first response message is not a header")
                    header_response = message.header
                else:
                    # The output's chunks in order, then (return_lse) the LSE's.
                    part = message.chunk
                    target = out if part.tensor == pb.TENSOR_OUT and not lse else lse
                    wanted = pb.TENSOR_OUT if target is out else pb.TENSOR_LSE
                    if part.tensor != wanted or part.offset != len(target):
                        raise AttnServeError("AttendStream", self.address,
                                             grpc.StatusCode.INTERNAL,
                                             f"{pb.TensorName.Name(part.tensor)} chunk at offset "
                                             f"{part.offset} after {len(target)} bytes")
                    target += part.data
                client["unmarshal_ns"] += time.perf_counter_ns() - t0
        except grpc.RpcError as error:
            raise _rpc_error("AttendStream", self.address, error.code(),
                             error.details()) from None
        if header_response is None:
            raise AttnServeError("AttendStream", self.address, grpc.StatusCode.INTERNAL,
                                 "stream ended without a response")
        return header_response, bytes(out), bytes(lse), client


def _torch_bits(q, k, v, dtype):
    """torch q, k, v -> (q, k, v as uint16 bit arrays, their wire dtype)."""
    (qb, wire), (kb, kwire), (vb, vwire) = (torch_tensors.to_bits(t, name)
                                           for t, name in ((q, "q"), (k, "k"), (v, "v")))
    if not wire == kwire == vwire:
        raise ValueError(f"q, k and v must share a dtype, got {q.dtype}, {k.dtype}, {v.dtype}")
    if dtype is not None and tensors.parse_dtype(dtype) != wire:
        raise ValueError(f"q is {q.dtype} but dtype={dtype!r} was given")
    return qb, kb, vb, wire


def _offsets(values, name, total):
    """cu_seqlens as an int32 array: batch + 1 non-decreasing offsets from 0 to `total`."""
    offsets = np.asarray(values.cpu() if hasattr(values, "cpu") else values).astype(np.int64)
    if (offsets.ndim != 1 or offsets.size < 2 or offsets[0] != 0 or np.any(np.diff(offsets) < 0)
            or offsets[-1] != total):
        raise ValueError(f"{name} must be batch + 1 non-decreasing offsets from 0 to the "
                         f"{total} packed tokens, got {offsets.tolist()}")
    return offsets.astype(np.int32)


def attend(q, k, v, address="localhost:50051", **kwargs):
    """One call on a fresh connection: Client(address).attend(q, k, v, **kwargs)."""
    attend_keys = ("dtype", "kernel", "softmax_scale", "request_id", "timeout", "stream",
                   "causal", "window_size", "return_lse", "cu_seqlens_q", "cu_seqlens_k",
                   "max_seqlen_q", "max_seqlen_k")
    call_kwargs = {key: kwargs.pop(key) for key in attend_keys if key in kwargs}
    with Client(address, **kwargs) as client:
        return client.attend(q, k, v, **call_kwargs)
