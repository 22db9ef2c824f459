"""The native transport: the client's calls through the C++ client.

libattn_client_c.so (client/c_api, header attn/client/c_api.h) is loaded
with ctypes, which releases the GIL for the length of each foreign call and
does not depend on the Python version. One handle serves every thread of a
Client, so Python threads run their calls in parallel in C++. Nothing here
imports grpc or protobuf; only list_kernels/server_info/stats parse the
messages the library returns with the protobuf stubs, when those are asked for.

The library is looked up, first found wins (library_candidates):
  1. $ATTN_CLIENT_LIB, a path to the .so (an error if it names no file);
  2. next to this package (the build tree copies it there);
  3. ../../lib of this package: the relocatable bundle's lib/
     (deploy/bundle.sh puts the package in <bundle>/python/).

Copies per attend call: none of the tensors on the Python side (q, k, v are
passed as pointers to the caller's arrays when they are contiguous 16-bit
arrays, and the C library writes O and the LSE into arrays allocated here).
In C++, the inputs are sent from the caller's arrays as they are (borrowed,
not copied), and the output is copied once from the parsed response into
our array (attn/client/c_api.h).
"""

import ctypes
import os
import time

import numpy as np

from . import attend_call, tensors
from .errors import AttnServeConnectionError, rpc_error, status_code

LIBRARY_NAME = "libattn_client_c.so"
ENV_VAR = "ATTN_CLIENT_LIB"
_ERROR_BYTES = 2048
_TRANSPORT = {None: 0, False: 1, True: 2}  # stream= -> ATTN_TRANSPORT_AUTO/UNARY/STREAM
_DTYPE = {tensors.FP16: 0, tensors.BF16: 1}  # attn/c_dtype.h


class _Options(ctypes.Structure):
    _fields_ = [
        ("address", ctypes.c_char_p),
        ("connect_timeout_s", ctypes.c_double),
        ("rpc_timeout_s", ctypes.c_double),
        ("max_message_bytes", ctypes.c_int64),
        ("stream_threshold_bytes", ctypes.c_int64),
        ("stream_chunk_bytes", ctypes.c_int64),
        ("fetch_server_info", ctypes.c_int),
        ("dedicated_connection", ctypes.c_int),
        ("load_balancing_policy", ctypes.c_char_p),
        ("tls", ctypes.c_int),
        ("tls_root_certs_path", ctypes.c_char_p),
        ("tls_cert_chain_path", ctypes.c_char_p),
        ("tls_private_key_path", ctypes.c_char_p),
        ("tls_server_name", ctypes.c_char_p),
        ("metadata", ctypes.POINTER(ctypes.c_char_p)),
        ("metadata_pairs", ctypes.c_size_t),
    ]


class _Timing(ctypes.Structure):
    _fields_ = [(name, ctypes.c_int64) for name in (
        "receive_ns", "decode_ns", "queue_ns", "h2d_ns", "kernel_ns", "d2h_ns", "total_ns",
        "marshal_ns", "unmarshal_ns", "round_trip_ns", "upload_ns")] + [
        ("streamed", ctypes.c_int),
        ("kernel_tflops", ctypes.c_double),
        ("request_id", ctypes.c_char * 64),
        ("kernel", ctypes.c_char * 64),
        ("backend", ctypes.c_char * 16),
        ("device", ctypes.c_char * 128),
    ]


class _Buffer(ctypes.Structure):
    _fields_ = [("data", ctypes.c_void_p), ("size", ctypes.c_size_t)]


class _TensorRef(ctypes.Structure):
    _fields_ = [("region_id", ctypes.c_char_p), ("offset", ctypes.c_int64),
                ("byte_size", ctypes.c_int64)]


class _TensorRefs(ctypes.Structure):
    _fields_ = [("struct_size", ctypes.c_size_t)] + [
        (name, _TensorRef) for name in ("q", "k", "v", "out", "lse")]


class _TensorPaths(ctypes.Structure):
    _fields_ = [("struct_size", ctypes.c_size_t)] + [
        (name, ctypes.c_int) for name in ("q", "k", "v", "out", "lse")]


_REGION_ID_BYTES = 64  # ATTN_CLIENT_REGION_ID_BYTES
_REGION_FUNCTIONS = ("attn_client_attend_refs", "attn_client_register_system_region",
                     "attn_client_register_cuda_region", "attn_client_unregister_region",
                     "attn_client_list_regions")


def _has_regions(lib):
    """True when the library has the shared-memory region functions."""
    return all(hasattr(lib, name) for name in _REGION_FUNCTIONS)


def library_candidates():
    """The paths tried, in order (see the module's docstring)."""
    env = os.environ.get(ENV_VAR)
    if env:
        return [env]
    here = os.path.dirname(os.path.abspath(__file__))
    return [os.path.join(here, LIBRARY_NAME),
            os.path.normpath(os.path.join(here, "..", "..", "lib", LIBRARY_NAME))]


def find_library():
    """(path, None) for the first candidate that exists, or (None, why not)."""
    candidates = library_candidates()
    for path in candidates:
        if os.path.isfile(path):
            return path, None
    if os.environ.get(ENV_VAR):
        return None, f"${ENV_VAR} names {candidates[0]}, which is not a file"
    return None, f"{LIBRARY_NAME} not found (looked for {' and '.join(candidates)})"


_library = None


def _without_call_prefix(message, address):
    """The C++ client's message less its "<rpc> to <address>: " prefix:
    AttnServeError puts the RPC and address in front itself, and details()
    is the server's own message, as with grpcio."""
    rpc, separator, rest = message.partition(f" to {address}: ")
    return rest if separator and rpc and " " not in rpc else message


def _load(path):
    """The loaded library with its prototypes (once per process)."""
    global _library
    if _library is not None:
        return _library
    lib = ctypes.CDLL(path)  # CDLL, not PyDLL: calls release the GIL
    p, i64, c = ctypes.c_void_p, ctypes.c_int64, ctypes.c_char_p
    lib.attn_client_options_init.argtypes = [ctypes.POINTER(_Options)]
    lib.attn_client_options_init.restype = None
    lib.attn_client_connect.argtypes = [ctypes.POINTER(_Options), ctypes.POINTER(p), c,
                                        ctypes.c_size_t]
    lib.attn_client_close.argtypes = [p]
    lib.attn_client_close.restype = None
    lib.attn_client_attend.argtypes = [
        p, c, ctypes.c_int, p, p, p, p, p, p, p,   # client, kernel, dtype, q, k, v, out, lse, cu_q, cu_k
        i64, i64, i64, i64, i64, i64,              # batch, seqlen_q/k, heads_q/kv, head_dim
        ctypes.c_int, i64, i64, ctypes.c_float,    # causal, window, softmax_scale
        i64, i64, ctypes.c_double, ctypes.c_int, c,  # total_q/k, timeout_s, transport, request_id
        ctypes.POINTER(_Timing), c, ctypes.c_size_t]
    lib.attn_client_health.argtypes = [p, c, ctypes.POINTER(ctypes.c_int), c, ctypes.c_size_t]
    lib.attn_client_stream_threshold_bytes.argtypes = [p]
    lib.attn_client_stream_threshold_bytes.restype = i64
    lib.attn_client_buffer_free.argtypes = [ctypes.POINTER(_Buffer)]
    lib.attn_client_buffer_free.restype = None
    for name in ("attn_client_server_info", "attn_client_list_kernels", "attn_client_stats"):
        getattr(lib, name).argtypes = [p, ctypes.POINTER(_Buffer), c, ctypes.c_size_t]
    # Shared-memory regions: absent from a library built before them (then
    # attend goes through attn_client_attend, and regions are refused).
    if _has_regions(lib):
        lib.attn_client_attend_refs.argtypes = (
            lib.attn_client_attend.argtypes[:-3]
            + [ctypes.POINTER(_TensorRefs), ctypes.POINTER(_Timing), ctypes.POINTER(_TensorPaths),
               c, ctypes.c_size_t])
        lib.attn_client_register_system_region.argtypes = [
            p, c, c, i64, i64, c, ctypes.c_size_t, c, ctypes.c_size_t]
        lib.attn_client_register_cuda_region.argtypes = [
            p, c, c, ctypes.c_int, i64, i64, c, ctypes.c_size_t, c, ctypes.c_size_t]
        lib.attn_client_unregister_region.argtypes = [p, c, c, ctypes.c_size_t]
        lib.attn_client_list_regions.argtypes = [p, ctypes.POINTER(_Buffer), c, ctypes.c_size_t]
    _library = lib
    return lib


def _encode(text):
    return text.encode("utf-8") if text else None


def _pointer(array):
    return None if array is None else ctypes.c_void_p(array.ctypes.data)


class NativeTransport:
    name = "native"

    def __init__(self, address, *, library, timeout, connect_timeout, tls, root_certificates,
                 certificate_chain, private_key, server_name, max_message_bytes,
                 stream_threshold_bytes, stream_chunk_bytes, metadata, fetch_server_info,
                 load_balancing_policy):
        self.address = address
        self.library = library
        self._handle = None
        self._lib = _load(library)
        self._regions = _has_regions(self._lib)
        options = _Options()
        self._lib.attn_client_options_init(ctypes.byref(options))
        options.address = address.encode("utf-8")
        options.connect_timeout_s = float(connect_timeout)
        options.rpc_timeout_s = float(timeout)
        options.max_message_bytes = int(max_message_bytes)
        options.stream_threshold_bytes = int(stream_threshold_bytes or 0)
        options.stream_chunk_bytes = int(stream_chunk_bytes)
        options.fetch_server_info = 1 if fetch_server_info else 0
        options.load_balancing_policy = _encode(load_balancing_policy)
        options.tls = 1 if tls else 0
        options.tls_root_certs_path = _encode(root_certificates)
        options.tls_cert_chain_path = _encode(certificate_chain)
        options.tls_private_key_path = _encode(private_key)
        options.tls_server_name = _encode(server_name)
        flat = [s.encode("utf-8") for pair in metadata for s in pair]
        keep = (ctypes.c_char_p * max(1, len(flat)))(*flat)
        options.metadata = ctypes.cast(keep, ctypes.POINTER(ctypes.c_char_p))
        options.metadata_pairs = len(flat) // 2
        handle = ctypes.c_void_p()
        error = ctypes.create_string_buffer(_ERROR_BYTES)
        code = self._lib.attn_client_connect(ctypes.byref(options), ctypes.byref(handle), error,
                                             _ERROR_BYTES)
        if code != 0:
            raise self._error("connect", code, error, connect=True)
        self._handle = handle
        self.stream_threshold_bytes = int(self._lib.attn_client_stream_threshold_bytes(handle))
        self._info = None

    def close(self):
        if self._handle:
            self._lib.attn_client_close(self._handle)
            self._handle = None

    def __del__(self):
        self.close()

    def _error(self, rpc, code, error, connect=False):
        code = status_code(code)
        details = _without_call_prefix(error.value.decode("utf-8", "replace"), self.address)
        if connect and code.name == "UNAVAILABLE":
            return AttnServeConnectionError(rpc, self.address, code, details)
        return rpc_error(rpc, self.address, code, details)

    # --- queries -----------------------------------------------------------

    def _message(self, rpc, function, type_name):
        from attnserve.v1 import attention_pb2 as pb  # protobuf: only for these messages

        buffer = _Buffer()
        error = ctypes.create_string_buffer(_ERROR_BYTES)
        code = function(self._handle, ctypes.byref(buffer), error, _ERROR_BYTES)
        if code != 0:
            if status_code(code).name == "NOT_FOUND" and rpc == "GetServerInfo":
                return None
            raise self._error(rpc, code, error)
        try:
            return getattr(pb, type_name).FromString(ctypes.string_at(buffer.data, buffer.size))
        finally:
            self._lib.attn_client_buffer_free(ctypes.byref(buffer))

    @property
    def info(self):
        """ServerInfo fetched by the C++ client at connect (None without fetch_server_info)."""
        if self._info is None:
            self._info = self._message("GetServerInfo", self._lib.attn_client_server_info,
                                       "ServerInfo")
        return self._info

    def list_kernels(self):
        return list(self._message("ListKernels", self._lib.attn_client_list_kernels,
                                  "ListKernelsResponse").kernels)

    def server_info(self):
        return self.info

    def stats(self):
        return self._message("GetStats", self._lib.attn_client_stats, "ServerStats")

    def health(self, service):
        """The grpc.health.v1 status number."""
        status = ctypes.c_int(-1)
        error = ctypes.create_string_buffer(_ERROR_BYTES)
        code = self._lib.attn_client_health(self._handle, _encode(service), ctypes.byref(status),
                                            error, _ERROR_BYTES)
        if code != 0:
            raise self._error("Health.Check", code, error)
        return status.value

    # --- shared-memory regions ------------------------------------------------

    def _region_function(self, name):
        """The library's function `name`; ValueError for a library from before regions."""
        if not self._regions:
            raise ValueError(f"{self.library} predates shared-memory regions; use a newer "
                             "libattn_client_c.so or transport='grpcio'")
        return getattr(self._lib, name)

    def _region_call(self, rpc, name, *args):
        function = self._region_function(name)
        error = ctypes.create_string_buffer(_ERROR_BYTES)
        code = function(self._handle, *args, error, _ERROR_BYTES)
        if code != 0:
            raise self._error(rpc, code, error)

    def register_system_region(self, name, shm_name, offset, byte_size):
        """The server's id of the new system region."""
        region_id = ctypes.create_string_buffer(_REGION_ID_BYTES)
        self._region_call("RegisterRegion", "attn_client_register_system_region", _encode(name),
                          _encode(shm_name), int(offset), int(byte_size), region_id,
                          _REGION_ID_BYTES)
        return region_id.value.decode()

    def register_cuda_region(self, name, ipc_handle, device, offset, byte_size):
        """The server's id of the new CUDA region (ipc_handle: the 64 bytes)."""
        region_id = ctypes.create_string_buffer(_REGION_ID_BYTES)
        self._region_call("RegisterRegion", "attn_client_register_cuda_region", _encode(name),
                          bytes(ipc_handle), int(device), int(offset), int(byte_size), region_id,
                          _REGION_ID_BYTES)
        return region_id.value.decode()

    def unregister_region(self, name):
        self._region_call("UnregisterRegion", "attn_client_unregister_region", _encode(name))

    def list_regions(self):
        function = self._region_function("attn_client_list_regions")
        return list(self._message("ListRegions", function, "ListRegionsResponse").regions)

    # --- attention ---------------------------------------------------------

    def attend(self, call, timeout, stream):
        """Runs `call` (attend_call.AttendCall); returns (out, lse, timing fields), out and
        lse None when they went to regions (or the LSE was not asked for)."""
        start = time.perf_counter_ns()
        out_inline = "out" not in call.refs
        lse_inline = call.return_lse and "lse" not in call.refs
        # The C library writes O (and the LSE) here unless they go to regions.
        bits = np.empty(call.shape, dtype="<u2") if out_inline else None
        lse = np.empty(call.lse_shape, dtype=np.float32) if lse_inline else None
        timing = _Timing()
        error = ctypes.create_string_buffer(_ERROR_BYTES)
        q, k, v = call.bits
        varlen = call.varlen
        args = [self._handle, _encode(call.kernel), _DTYPE[call.wire_dtype], _pointer(q),
                _pointer(k), _pointer(v), _pointer(bits), _pointer(lse),
                _pointer(call.cu_seqlens_q), _pointer(call.cu_seqlens_k), call.batch,
                call.seq_len, call.kv_seq_len, call.heads, call.kv_heads, call.head_dim,
                1 if call.causal else 0, call.window_left, call.window_right,
                call.softmax_scale or 0.0, call.shape[0] if varlen else 0,
                call.kv_shape[0] if varlen else 0, float(timeout), _TRANSPORT[stream],
                _encode(call.request_id)]
        paths = None
        if self._regions:
            refs = _TensorRefs(struct_size=ctypes.sizeof(_TensorRefs))
            for name, (region_id, offset, byte_size) in call.refs.items():
                setattr(refs, name, _TensorRef(region_id.encode(), offset, byte_size))
            paths = _TensorPaths(struct_size=ctypes.sizeof(_TensorPaths))
            prepared = time.perf_counter_ns()
            code = self._lib.attn_client_attend_refs(*args, ctypes.byref(refs),
                                                     ctypes.byref(timing), ctypes.byref(paths),
                                                     error, _ERROR_BYTES)
        elif call.refs:
            self._region_function("attn_client_attend_refs")  # raises: regions need it
        else:
            prepared = time.perf_counter_ns()
            code = self._lib.attn_client_attend(*args, ctypes.byref(timing), error, _ERROR_BYTES)
        returned = time.perf_counter_ns()
        if code != 0:
            raise self._error("Attend", code, error)
        out = tensors.bits_as_output(bits, call.wire_dtype, call.like) if out_inline else None
        return out, lse, dict(
            receive_ns=timing.receive_ns, decode_ns=timing.decode_ns, queue_ns=timing.queue_ns,
            h2d_ns=timing.h2d_ns, kernel_ns=timing.kernel_ns, d2h_ns=timing.d2h_ns,
            total_ns=timing.total_ns, marshal_ns=timing.marshal_ns + prepared - start,
            unmarshal_ns=timing.unmarshal_ns + time.perf_counter_ns() - returned,
            upload_ns=timing.upload_ns, streamed=bool(timing.streamed),
            request_id=timing.request_id.decode(), kernel=timing.kernel.decode(),
            backend=timing.backend.decode(), device=timing.device.decode("utf-8", "replace"),
            kernel_tflops=timing.kernel_tflops,
            **attend_call.path_fields(None if paths is None else
                                      (paths.q, paths.k, paths.v, paths.out, paths.lse), call))
