"""attnserve's Python client: remote FlashAttention on NumPy arrays or torch tensors.

    from attnserve_client import Client

    with Client("gpu-node:50051") as client:
        out, timing = client.attend(q, k, v)     # q, k, v: [B, S, H, D]
        print(timing)                            # server and client breakdown

Two transports carry the calls (Client's `transport`):

* "native": the C++ client (libattn_client_c.so, through ctypes; native.py).
  The GIL is released during each call, so threads sharing a Client run in
  parallel, and the tensors are not copied on the Python side. Needs neither
  grpcio nor protobuf.
* "grpcio": Python's grpcio (grpc_transport.py), the fallback.
* "auto" (default): native when the library is found (native.find_library:
  $ATTN_CLIENT_LIB, next to the package, or the bundle's lib/), else grpcio;
  Client.transport says which was taken and Client.transport_reason why.

Messages may be up to 2 GiB - 1 each way (gRPC's default receive limit of
4 MiB is raised), and requests larger than the server's message limit go
over the chunked AttendStream RPC automatically. A failed call raises
AttnServeError (a grpc.RpcError when grpcio is installed) with code() and
details(); a missed deadline raises its subclass AttnServeTimeout, also a
TimeoutError; an unreachable server raises AttnServeConnectionError, also a
ConnectionError, after `connect_timeout` seconds.
"""

import dataclasses
import time

from . import health, native, tensors, torch_tensors
from .attend_call import make_call
from .errors import AttnServeConnectionError, AttnServeError, AttnServeTimeout  # noqa: F401

MAX_MESSAGE_BYTES = 2**31 - 1
TRANSPORTS = ("auto", "native", "grpcio")


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


class Client:
    """A connection to one attnserve server. Thread-safe; reuse it."""

    def __init__(
        self,
        address="localhost:50051",
        *,
        transport="auto",
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
        token=None,
        fetch_server_info=True,
        load_balancing_policy=None,
    ):
        """Connects to `address` (host:port or a gRPC target).

        transport: 'native' (the C++ client; ValueError when its library is
            not found), 'grpcio', or 'auto' (native when found, else grpcio).
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
        token: bearer token for a server started with --token_file, sent as
            'authorization: Bearer <token>' with every call (use TLS beyond
            loopback: the token is a password).
        load_balancing_policy: e.g. 'round_robin' across a dns:/// target's
            addresses; None = gRPC's default (pick_first).
        """
        if transport not in TRANSPORTS:
            raise ValueError(f"transport must be one of {', '.join(TRANSPORTS)}, got {transport!r}")
        self.address = address
        self.timeout = timeout
        settings = dict(
            timeout=timeout, connect_timeout=connect_timeout,
            tls=tls or bool(root_certificates or certificate_chain),
            root_certificates=root_certificates, certificate_chain=certificate_chain,
            private_key=private_key, server_name=server_name,
            max_message_bytes=max_message_bytes, stream_threshold_bytes=stream_threshold_bytes,
            stream_chunk_bytes=stream_chunk_bytes,
            metadata=tuple(metadata) + ((("authorization", "Bearer " + token),) if token else ()),
            fetch_server_info=fetch_server_info, load_balancing_policy=load_balancing_policy)
        library, missing = (None, "transport='grpcio' was asked for") if transport == "grpcio" \
            else native.find_library()
        if library is not None:
            self._impl = native.NativeTransport(address, library=library, **settings)
            self.transport_reason = f"{library} loaded"
        elif transport == "native":
            raise ValueError(f"transport='native': {missing}; set ${native.ENV_VAR} to its path")
        else:
            from .grpc_transport import GrpcTransport  # grpcio: only on this path

            self._impl = GrpcTransport(address, **settings)
            self.transport_reason = missing
        self.transport = self._impl.name
        self.stream_threshold_bytes = self._impl.stream_threshold_bytes

    @property
    def info(self):
        """The ServerInfo message fetched at connect; None with fetch_server_info=False."""
        return self._impl.info

    def close(self):
        self._impl.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    # --- queries -----------------------------------------------------------

    def list_kernels(self):
        """The server's kernels (KernelDescriptor messages), in ladder order."""
        return self._impl.list_kernels()

    def server_info(self):
        """The ServerInfo message: version, backend, devices, limits."""
        return self._impl.server_info()

    def stats(self):
        """The ServerStats message: cumulative counters since the server started."""
        return self._impl.stats()

    def health(self, service=""):
        """grpc.health.v1 status name: 'SERVING', 'NOT_SERVING', 'SERVICE_UNKNOWN', ..."""
        return health.STATUS_NAMES.get(self._impl.health(service), "UNKNOWN")

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
        call = make_call(q, k, v, dtype=dtype, kernel=kernel, softmax_scale=softmax_scale,
                         request_id=request_id, causal=causal, window_size=window_size,
                         return_lse=return_lse, cu_seqlens_q=cu_seqlens_q,
                         cu_seqlens_k=cu_seqlens_k, max_seqlen_q=max_seqlen_q,
                         max_seqlen_k=max_seqlen_k)
        prepared = time.perf_counter_ns()
        out, lse, fields = self._impl.attend(call, self.timeout if timeout is None else timeout,
                                             stream)
        fields["marshal_ns"] += prepared - start
        timing = Timing(round_trip_ns=time.perf_counter_ns() - start, **fields)
        if torch_like is not None:
            out = torch_tensors.from_bits(out, torch_like)
            lse = torch_tensors.to_device(lse, torch_like) if return_lse else None
        if return_lse:
            return out, lse, timing
        return out, timing


def _torch_bits(q, k, v, dtype):
    """torch q, k, v -> (q, k, v as uint16 bit arrays, their wire dtype)."""
    (qb, wire), (kb, kwire), (vb, vwire) = (torch_tensors.to_bits(t, name)
                                           for t, name in ((q, "q"), (k, "k"), (v, "v")))
    if not wire == kwire == vwire:
        raise ValueError(f"q, k and v must share a dtype, got {q.dtype}, {k.dtype}, {v.dtype}")
    if dtype is not None and tensors.parse_dtype(dtype) != wire:
        raise ValueError(f"q is {q.dtype} but dtype={dtype!r} was given")
    return qb, kb, vb, wire


def attend(q, k, v, address="localhost:50051", **kwargs):
    """One call on a fresh connection: Client(address).attend(q, k, v, **kwargs)."""
    attend_keys = ("dtype", "kernel", "softmax_scale", "request_id", "timeout", "stream",
                   "causal", "window_size", "return_lse", "cu_seqlens_q", "cu_seqlens_k",
                   "max_seqlen_q", "max_seqlen_k")
    call_kwargs = {key: kwargs.pop(key) for key in attend_keys if key in kwargs}
    with Client(address, **kwargs) as client:
        return client.attend(q, k, v, **call_kwargs)
