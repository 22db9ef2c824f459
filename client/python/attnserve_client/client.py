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

Same-host shared memory (a server started with --allow_shared_memory,
reached over loopback or a unix socket): register a SystemSharedMemory
(register_system_region) or torch CUDA tensors (register_cuda_tensor), and
attend() sends arrays and tensors that lie in registered regions by
reference instead of their bytes, and writes the output into `out=` in
place (see attend).

Messages may be up to 2 GiB - 1 each way (gRPC's default receive limit of
4 MiB is raised), and requests larger than the server's message limit go
over the chunked AttendStream RPC automatically. A failed call raises
AttnServeError (a grpc.RpcError when grpcio is installed) with code() and
details(); a missed deadline raises its subclass AttnServeTimeout, also a
TimeoutError; an unreachable server raises AttnServeConnectionError, also a
ConnectionError, after `connect_timeout` seconds.
"""

import dataclasses
import threading
import time

import numpy as np

from . import cuda_ipc, health, native, regions, sessions, tensors, torch_tensors
from .attend_call import make_call
from .shared_memory import SystemSharedMemory
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
    # How each tensor travelled: "inline", "system_shm" (a system region),
    # "cuda_ipc" (a CUDA region); "unspecified" for an LSE not asked for.
    q_path: str = "unspecified"
    k_path: str = "unspecified"
    v_path: str = "unspecified"
    out_path: str = "unspecified"
    lse_path: str = "unspecified"

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
        lines = [head] + [f"  {name:<18} {ns / 1e6:10.3f} ms" for name, ns in rows]
        paths = [(name, getattr(self, f"{name}_path")) for name in ("q", "k", "v", "out", "lse")]
        if any(path not in ("inline", "unspecified") for _, path in paths):
            lines.append("  tensors: " + ", ".join(f"{name} {path}" for name, path in paths
                                                    if path != "unspecified"))
        return "\n".join(lines)


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
        self._regions = regions.RegionTable()
        self._settings = settings
        self._sessions = None  # sessions.SessionChannel, opened by the first open_session
        self._sessions_lock = threading.Lock()

    @property
    def info(self):
        """The ServerInfo message fetched at connect; None with fetch_server_info=False."""
        return self._impl.info

    def close(self):
        """Closes the connection; the server unregisters this client's regions
        and closes its sessions."""
        self._regions.clear()
        with self._sessions_lock:
            channel, self._sessions = self._sessions, None
        if channel is not None:
            channel.close()
            if channel.own_transport:
                channel.transport.close()
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

    # --- same-host shared memory ---------------------------------------------
    #
    # Regions belong to this client's lease (attention.proto's HoldRegions),
    # opened by the first registration and ended by close(), when the server
    # unregisters them all. Needs a server started with --allow_shared_memory
    # on this host (AttnServeError FAILED_PRECONDITION otherwise).

    def register_system_region(self, name, memory, offset=0, byte_size=None):
        """Registers POSIX shared memory with the server as region `name` (1 to 64
        bytes, unique among this client's regions); returns its Region.

        memory: a SystemSharedMemory (then NumPy arrays from its ndarray() that
            attend() is given go by reference), or the shm_open name ('/...') of
            an object this process has not mapped (name tensors in it with
            TensorRef; byte_size is then needed).
        offset, byte_size: the part registered (offset a multiple of the page
            size); default all of it.
        """
        if isinstance(memory, SystemSharedMemory):
            shm_name, address = memory.name, memory.address + int(offset)
            if byte_size is None:
                byte_size = memory.size - int(offset)
        elif isinstance(memory, str):
            shm_name, address = memory, None
            if byte_size is None:
                raise ValueError("byte_size is needed for a region given by its shm_open name")
        else:
            raise TypeError("memory must be a SystemSharedMemory or a shm_open name, got "
                            f"{type(memory).__name__}")
        region_id = self._impl.register_system_region(name, shm_name, int(offset), int(byte_size))
        region = regions.Region(name=name, region_id=region_id, kind=regions.SYSTEM,
                                byte_size=int(byte_size), address=address, memory=memory)
        self._regions.add(region)
        return region

    def register_cuda_tensor(self, name, tensor):
        """Registers a contiguous torch CUDA tensor's memory as CUDA region `name`
        (CUDA IPC); returns its Region. A CUDA server on the same GPU then reads
        tensors that lie in it, and writes outputs into it, in place: attend()
        sends such tensors (the tensor itself, or views into it) by reference.
        The Region keeps the tensor alive until it is unregistered. Not for
        tensors allocated with PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True.
        """
        export = cuda_ipc.export(tensor)
        region_id = self._impl.register_cuda_region(name, export.ipc_handle, export.device,
                                                    export.offset, export.byte_size)
        region = regions.Region(name=name, region_id=region_id, kind=regions.CUDA,
                                byte_size=export.byte_size, address=export.address,
                                device=export.device, memory=tensor)
        self._regions.add(region)
        return region

    def register_cuda_region(self, name, ipc_handle, device, offset, byte_size):
        """Registers bytes [offset, offset + byte_size) of the device allocation
        whose cudaIpcGetMemHandle is `ipc_handle` (64 bytes) on CUDA device
        `device`; returns its Region (name tensors in it with TensorRef)."""
        region_id = self._impl.register_cuda_region(name, bytes(ipc_handle), int(device),
                                                    int(offset), int(byte_size))
        region = regions.Region(name=name, region_id=region_id, kind=regions.CUDA,
                                byte_size=int(byte_size), device=int(device))
        self._regions.add(region)
        return region

    def unregister_region(self, region):
        """Unregisters a Region (or a region's name); returns once no request uses it."""
        name = region.name if isinstance(region, regions.Region) else region
        self._impl.unregister_region(name)
        self._regions.remove(name)

    def list_regions(self):
        """The server's RegionInfo messages of this client's regions."""
        return self._impl.list_regions()

    # --- KV-cache sessions (sessions.py) ------------------------------------
    #
    # Sessions belong to this client's session lease (attention.proto's
    # HoldSessions), opened by the first open_session and ended by close(),
    # when the server closes them all. The lease and the session calls go
    # over one grpcio channel (this client's, or with the native transport a
    # channel of their own with the same settings): grpcio is needed.

    def _session_channel(self):
        with self._sessions_lock:
            if self._sessions is None:
                from .grpc_transport import GrpcTransport

                own = not isinstance(self._impl, GrpcTransport)
                transport = GrpcTransport(self.address, **dict(
                    self._settings, fetch_server_info=False,
                    stream_threshold_bytes=self.stream_threshold_bytes)) if own else self._impl
                self._sessions = sessions.SessionChannel(transport, own_transport=own)
            return self._sessions

    def open_session(self, *, num_layers, num_heads, head_dim, max_tokens, kv_num_heads=0,
                     dtype="bf16", softmax_scale=None, window_left=None, reserve=False,
                     timeout=None):
        """A new KV-cache session on the server: one sequence's K/V over
        num_layers layers of num_heads query heads over kv_num_heads K/V heads
        (0: num_heads) of head_dim, holding at most max_tokens tokens per layer.

        softmax_scale: None = 1/sqrt(head_dim). window_left: a sliding window
        (a new token at position p sees cached positions >= p - window_left);
        None = the whole cache. reserve: take every page max_tokens needs now,
        so no step finds the pool full (default: pages as tokens arrive).
        Returns a sessions.Session (attend, fork, truncate, close; a context
        manager). AttnServeError RESOURCE_EXHAUSTED when the pool is full,
        FAILED_PRECONDITION when the server serves no sessions.
        """
        return sessions.open_session(
            self._session_channel(), num_layers=num_layers, num_heads=num_heads,
            head_dim=head_dim, max_tokens=max_tokens, kv_num_heads=kv_num_heads, dtype=dtype,
            softmax_scale=softmax_scale, window_left=window_left, reserve=reserve,
            timeout=timeout)

    def attend_sessions(self, layer, steps, *, return_lse=False, timeout=None, request_id=""):
        """One step of many sessions in one call (one launch on the server):
        steps = [(session, q, k, v), ...] as Session.attend takes them, distinct
        sessions of one geometry. Returns a sessions.StepResult."""
        return sessions.attend_sessions(self._session_channel(), layer, steps,
                                        return_lse=return_lse, timeout=timeout,
                                        request_id=request_id)

    def list_sessions(self, timeout=None):
        """The server's SessionInfo messages of this client's sessions."""
        return sessions.list_sessions(self._session_channel(), timeout)

    # --- attention ---------------------------------------------------------

    def attend(self, q, k, v, *, dtype=None, kernel="", softmax_scale=None, request_id="",
               timeout=None, stream=None, causal=False, window_size=(-1, -1), return_lse=False,
               cu_seqlens_q=None, cu_seqlens_k=None, max_seqlen_q=None, max_seqlen_k=None,
               out=None, lse_out=None):
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

        Same-host shared memory (after register_system_region or
        register_cuda_tensor): q, k, v lying in a registered region (NumPy
        arrays from SystemSharedMemory.ndarray, torch CUDA tensors in a
        registered tensor) are sent by reference, not copied; a TensorRef
        names a tensor in a region directly. Pending work on their CUDA
        devices is waited for first (torch.cuda.synchronize).
        out: an array or tensor in a registered region (q's shape, its 16-bit
            dtype: fp16, bf16 or raw uint16/int16 bits; contiguous), or a
            TensorRef: the server writes the output there, and it is the `out`
            returned (a TensorRef into a system region mapped here: a NumPy view).
        lse_out: the same for the LSE (float32 [B, H, S]), with return_lse=True.
        Calls with references are unary (stream=True is refused).
        """
        start = time.perf_counter_ns()
        torch_like = None
        cuda_devices = set()  # of tensors the server reads or writes in place
        if any(torch_tensors.torch_of(t) is not None for t in (q, k, v)):
            torch_like = q
            q, k, v, dtype = self._torch_inputs(q, k, v, dtype, cuda_devices)
        call = make_call(q, k, v, dtype=dtype, kernel=kernel, softmax_scale=softmax_scale,
                         request_id=request_id, causal=causal, window_size=window_size,
                         return_lse=return_lse, cu_seqlens_q=cu_seqlens_q,
                         cu_seqlens_k=cu_seqlens_k, max_seqlen_q=max_seqlen_q,
                         max_seqlen_k=max_seqlen_k)
        for name, bits in zip("qkv", call.bits):
            found = None if bits is None else self._regions.find(bits.ctypes.data, bits.nbytes)
            if found is not None:
                call.refer(name, found[0].region_id, found[1], bits.nbytes)
        out_given = self._output_in_region(call, "out", out, cuda_devices)
        lse_given = self._output_in_region(call, "lse", lse_out, cuda_devices)
        if call.refs and stream:
            raise ValueError("tensors in shared-memory regions go over unary Attend; "
                             "stream=True takes none")
        if cuda_devices:
            cuda_ipc.synchronize(cuda_devices)
        prepared = time.perf_counter_ns()
        result, lse, fields = self._impl.attend(call, self.timeout if timeout is None else timeout,
                                                stream)
        fields["marshal_ns"] += prepared - start
        timing = Timing(round_trip_ns=time.perf_counter_ns() - start, **fields)
        if out_given is not None:
            result = out_given
        elif torch_like is not None:
            result = torch_tensors.from_bits(result, torch_like)
        if lse_given is not None:
            lse = lse_given
        elif torch_like is not None and return_lse:
            lse = torch_tensors.to_device(lse, torch_like)
        if return_lse:
            return result, lse, timing
        return result, timing

    def _torch_inputs(self, q, k, v, dtype, cuda_devices):
        """torch q, k, v -> TensorRefs for CUDA tensors in registered regions
        (their devices added to cuda_devices), uint16 host bit arrays for the
        rest; and their wire dtype."""
        wires, converted = [], []
        for t, name in ((q, "q"), (k, "k"), (v, "v")):
            wire = torch_tensors.wire_dtype(t, name)
            found = None
            if getattr(t, "is_cuda", False) and t.is_contiguous():
                found = self._regions.find(t.data_ptr(), t.numel() * t.element_size(),
                                           device=t.device.index)
            if found is not None:
                cuda_devices.add(t.device.index)
                converted.append(regions.TensorRef(found[0], found[1], tuple(t.shape), wire))
            else:
                converted.append(torch_tensors.to_bits(t, name)[0])
            wires.append(wire)
        if not wires[0] == wires[1] == wires[2]:
            raise ValueError(f"q, k and v must share a dtype, got {q.dtype}, {k.dtype}, {v.dtype}")
        if dtype is not None and tensors.parse_dtype(dtype) != wires[0]:
            raise ValueError(f"q is {q.dtype} but dtype={dtype!r} was given")
        return (*converted, wires[0])

    def _output_in_region(self, call, name, target, cuda_devices):
        """Points output `name` ('out' or 'lse') of `call` at `target`'s bytes in a
        registered region; returns what attend() hands back for it (None: no target)."""
        if target is None:
            return None
        param = "out" if name == "out" else "lse_out"
        if name == "lse" and not call.return_lse:
            raise ValueError("lse_out needs return_lse=True")
        shape, nbytes = (call.shape, call.out_bytes) if name == "out" else \
            (call.lse_shape, call.lse_bytes)
        if isinstance(target, regions.TensorRef):
            if target.byte_size != nbytes:
                raise ValueError(f"{param} has {target.byte_size} bytes; the {name} has {nbytes}")
            call.refer(name, *target.wire())
            if target.region.kind == regions.SYSTEM and target.region.address is not None:
                dtype = np.float32 if name == "lse" else _output_like(call)
                return target.region.ndarray(target.offset, shape, dtype)
            return target
        device = None
        if torch_tensors.torch_of(target) is not None:
            wire = "float32" if str(target.dtype) == "torch.float32" else \
                torch_tensors.wire_dtype(target, param)
            fits = wire == ("float32" if name == "lse" else call.wire_dtype)
            if getattr(target, "is_cuda", False):
                device = target.device.index
            address, contiguous = target.data_ptr(), target.is_contiguous()
        else:
            target = np.asarray(target)
            fits = target.dtype == np.float32 if name == "lse" else \
                tensors.holds_wire(target.dtype, call.wire_dtype)
            address, contiguous = target.ctypes.data, target.flags.c_contiguous
        if not fits or tuple(target.shape) != tuple(shape) or not contiguous:
            want = "float32" if name == "lse" else call.wire_dtype
            raise ValueError(f"{param} must be a contiguous {want} array or tensor of shape "
                             f"{tuple(shape)}, got {target.dtype} {tuple(target.shape)}"
                             + ("" if contiguous else ", not contiguous"))
        found = self._regions.find(address, nbytes, device=device)
        if found is None:
            raise ValueError(f"{param} must lie in a region registered with this client "
                             "(register_system_region / register_cuda_tensor); the server "
                             "writes it in place")
        call.refer(name, found[0].region_id, found[1], nbytes)
        if device is not None:
            cuda_devices.add(device)
        return target


def _output_like(call):
    """The NumPy dtype an output in a system region is viewed as: q's when it
    holds the wire elements as they are, else float16 or raw uint16 bf16 bits."""
    if tensors.holds_wire(call.like, call.wire_dtype):
        return call.like
    return np.float16 if call.wire_dtype == tensors.FP16 else np.uint16


def attend(q, k, v, address="localhost:50051", **kwargs):
    """One call on a fresh connection: Client(address).attend(q, k, v, **kwargs)."""
    attend_keys = ("dtype", "kernel", "softmax_scale", "request_id", "timeout", "stream",
                   "causal", "window_size", "return_lse", "cu_seqlens_q", "cu_seqlens_k",
                   "max_seqlen_q", "max_seqlen_k")
    call_kwargs = {key: kwargs.pop(key) for key in attend_keys if key in kwargs}
    with Client(address, **kwargs) as client:
        return client.attend(q, k, v, **call_kwargs)
