"""The grpcio transport: the client's calls through Python's grpcio.

The fallback of Client(transport="auto") when libattn_client_c.so is not
found, and what transport="grpcio" asks for. Imported only then, so the
native transport works on hosts without grpcio and protobuf.

Copies per attend call: the unary request is joined into one bytes object
(each of q, k, v copied once), grpcio copies the response into a bytes
object, protobuf parsing copies the output out of it, and from_wire copies it
into the returned array: 1 copy of each input and 2-3 of the output, all
under the GIL.
"""

import threading
import time

import grpc
import numpy as np

from . import attend_call, health, tensors
from .errors import AttnServeConnectionError, AttnServeError, rpc_error
from attnserve.v1 import attention_pb2 as pb
from attnserve.v1 import attention_pb2_grpc as pb_grpc

_FALLBACK_STREAM_THRESHOLD = 64 << 20  # when the server's limit is unknown
_MESSAGE_SLACK = 4096  # header fields and framing under a message limit
_ATTEND_METHOD = "/attnserve.v1.Attention/Attend"
_TENSOR_FIELDS = ((6, pb.TENSOR_Q), (7, pb.TENSOR_K), (8, pb.TENSOR_V))


# As the C++ client (channel_factory.h, attention_client.cc WaitForReady):
# a failed connection attempt is retried after 250 ms, not grpcio's 1 s, and
# the wait ends this long after the first failure, not at connect_timeout.
_INITIAL_RECONNECT_BACKOFF_MS = 250
_FAILED_ATTEMPTS_GRACE_S = 1.0


def _read_file(path):
    with open(path, "rb") as f:
        return f.read()


def _wait_for_ready(channel, connect_timeout):
    """None once the channel is READY, else why it did not become so."""
    changed = threading.Condition()
    seen = {"state": None, "failing_since": None}

    def on_change(state):
        with changed:
            seen["state"] = state
            if state == grpc.ChannelConnectivity.TRANSIENT_FAILURE and not seen["failing_since"]:
                seen["failing_since"] = time.monotonic()
            changed.notify_all()

    deadline = time.monotonic() + connect_timeout
    channel.subscribe(on_change, try_to_connect=True)
    try:
        with changed:
            while seen["state"] != grpc.ChannelConnectivity.READY:
                give_up = deadline
                if seen["failing_since"]:
                    give_up = min(deadline, seen["failing_since"] + _FAILED_ATTEMPTS_GRACE_S)
                if time.monotonic() >= give_up:
                    break
                changed.wait(give_up - time.monotonic())
            if seen["state"] == grpc.ChannelConnectivity.READY:
                return None
            if seen["failing_since"]:
                failed_for = time.monotonic() - seen["failing_since"]
                return (f"every connection attempt for {failed_for:.1f} s failed (refused, "
                        "unreachable, or the name does not resolve): is attn_server running "
                        "there?")
            return f"nothing answered within {connect_timeout:g} s: is attn_server running there?"
    finally:
        channel.unsubscribe(on_change)


class _Lease:
    """The client's side of HoldRegions (or HoldSessions, `rpc`): one call,
    kept open, whose first message is the lease id; the server ends what the
    lease holds (regions, sessions) when it ends (cancel(), the channel
    closing, this process exiting)."""

    def __init__(self, stub, metadata, timeout, address, rpc="HoldRegions"):
        request = getattr(pb, rpc + "Request")()
        self._call = getattr(stub, rpc)(request, metadata=metadata)  # no deadline
        first = {}

        def read_first():
            try:
                first["message"] = next(self._call)
            except grpc.RpcError as error:
                first["error"] = error
            except StopIteration:
                pass

        reader = threading.Thread(target=read_first, daemon=True)
        reader.start()
        reader.join(timeout)
        if reader.is_alive():
            self._call.cancel()
            reader.join()
            raise rpc_error(rpc, address, grpc.StatusCode.DEADLINE_EXCEEDED,
                            f"no lease id within {timeout:g} s")
        if "error" in first:
            raise rpc_error(rpc, address, first["error"].code(),
                            first["error"].details()) from None
        if "message" not in first:
            raise AttnServeError(rpc, address, grpc.StatusCode.INTERNAL,
                                 "the call ended without a lease id")
        self.id = first["message"].lease_id

    @property
    def alive(self):
        """False once the call has ended: its regions are gone, a new lease is needed."""
        return self._call.is_active()

    def end(self):
        self._call.cancel()


class GrpcTransport:
    name = "grpcio"

    def __init__(self, address, *, timeout, connect_timeout, tls, root_certificates,
                 certificate_chain, private_key, server_name, max_message_bytes,
                 stream_threshold_bytes, stream_chunk_bytes, metadata, fetch_server_info,
                 load_balancing_policy):
        self.address = address
        self.timeout = timeout
        self._metadata = tuple(metadata)
        self._chunk_bytes = int(stream_chunk_bytes)
        options = [
            ("grpc.max_send_message_length", int(max_message_bytes)),
            ("grpc.max_receive_message_length", int(max_message_bytes)),
            ("grpc.primary_user_agent", "attnserve-python-client"),
            ("grpc.initial_reconnect_backoff_ms", _INITIAL_RECONNECT_BACKOFF_MS),
        ]
        if load_balancing_policy:
            options.append(("grpc.lb_policy_name", load_balancing_policy))
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
        why_not = _wait_for_ready(self._channel, connect_timeout)
        if why_not:
            self._channel.close()
            raise AttnServeConnectionError("connect", address, grpc.StatusCode.UNAVAILABLE,
                                           why_not)
        self._stub = pb_grpc.AttentionStub(self._channel)
        self._lease = None
        self._lease_lock = threading.Lock()
        self._attend_raw = self._channel.unary_unary(_ATTEND_METHOD)  # bytes in, bytes out
        self._health_check = self._channel.unary_unary(health.CHECK_METHOD)

        self.info = self.server_info() if fetch_server_info else None
        if stream_threshold_bytes is None:
            limit = self.info.limits.max_message_bytes if self.info is not None else 0
            threshold = limit - _MESSAGE_SLACK if limit > 0 else _FALLBACK_STREAM_THRESHOLD
            stream_threshold_bytes = min(threshold, int(max_message_bytes) - _MESSAGE_SLACK)
        self.stream_threshold_bytes = int(stream_threshold_bytes)

    def close(self):
        with self._lease_lock:
            if self._lease is not None:
                self._lease.end()
                self._lease = None
        self._channel.close()

    def _call(self, rpc, fn, *args, **kwargs):
        try:
            return fn(*args, metadata=self._metadata, **kwargs)
        except grpc.RpcError as error:
            raise rpc_error(rpc, self.address, error.code(), error.details()) from None

    # --- queries -----------------------------------------------------------

    def list_kernels(self):
        response = self._call("ListKernels", self._stub.ListKernels, pb.ListKernelsRequest(),
                              timeout=self.timeout)
        return list(response.kernels)

    def server_info(self):
        return self._call("GetServerInfo", self._stub.GetServerInfo, pb.GetServerInfoRequest(),
                          timeout=self.timeout)

    def stats(self):
        return self._call("GetStats", self._stub.GetStats, pb.GetStatsRequest(),
                          timeout=self.timeout)

    def health(self, service):
        """The grpc.health.v1 status number."""
        try:
            raw = self._call("Health.Check", self._health_check, health.encode_request(service),
                             timeout=self.timeout)
        except AttnServeError as error:
            if error.code() == grpc.StatusCode.NOT_FOUND:
                return health.SERVICE_UNKNOWN
            raise
        return health.decode_response(raw)

    # --- shared-memory regions ------------------------------------------------

    def _lease_id(self):
        """The open lease's id, opened now if there is none (or the last one ended)."""
        with self._lease_lock:
            if self._lease is None or not self._lease.alive:
                self._lease = _Lease(self._stub, self._metadata, self.timeout, self.address)
            return self._lease.id

    def hold(self, rpc):
        """A new lease of `rpc` (HoldSessions: sessions.SessionChannel keeps it)."""
        return _Lease(self._stub, self._metadata, self.timeout, self.address, rpc)

    def unary(self, rpc, request, timeout=None):
        """The unary call `rpc` of the Attention service (the session calls)."""
        return self._call(rpc, getattr(self._stub, rpc), request,
                          timeout=self.timeout if timeout is None else timeout)

    def register_system_region(self, name, shm_name, offset, byte_size):
        """The server's id of the new system region."""
        request = pb.RegisterRegionRequest(
            lease_id=self._lease_id(), name=name,
            system=pb.SystemRegion(shm_name=shm_name, offset=offset, byte_size=byte_size))
        return self._call("RegisterRegion", self._stub.RegisterRegion, request,
                          timeout=self.timeout).region.region_id

    def register_cuda_region(self, name, ipc_handle, device, offset, byte_size):
        """The server's id of the new CUDA region (ipc_handle: the 64 bytes)."""
        request = pb.RegisterRegionRequest(
            lease_id=self._lease_id(), name=name,
            cuda=pb.CudaRegion(ipc_handle=bytes(ipc_handle), device_ordinal=device, offset=offset,
                               byte_size=byte_size))
        return self._call("RegisterRegion", self._stub.RegisterRegion, request,
                          timeout=self.timeout).region.region_id

    def unregister_region(self, name):
        request = pb.UnregisterRegionRequest(lease_id=self._lease_id(), name=name)
        self._call("UnregisterRegion", self._stub.UnregisterRegion, request, timeout=self.timeout)

    def list_regions(self):
        request = pb.ListRegionsRequest(lease_id=self._lease_id())
        return list(self._call("ListRegions", self._stub.ListRegions, request,
                               timeout=self.timeout).regions)

    # --- attention ---------------------------------------------------------

    def attend(self, call, timeout, stream):
        """Sends `call` (attend_call.AttendCall); returns (out, lse or None, timing fields)."""
        start = time.perf_counter_ns()
        tensor_shape = pb.TensorShape(num_heads=call.heads, head_dim=call.head_dim,
                                      batch=call.batch, seq_len=call.seq_len)
        if call.varlen or call.kv_seq_len != call.seq_len:
            tensor_shape.kv_seq_len = call.kv_seq_len
        if call.kv_heads != call.heads:
            tensor_shape.kv_num_heads = call.kv_heads
        header = pb.AttendRequest(
            request_id=call.request_id,
            dtype=pb.DTYPE_FLOAT16 if call.wire_dtype == tensors.FP16 else pb.DTYPE_BFLOAT16,
            shape=tensor_shape, kernel=call.kernel, causal=call.causal,
            return_lse=call.return_lse)
        if call.softmax_scale is not None:
            header.softmax_scale = call.softmax_scale
        if call.window_left != -1:
            header.window_left = call.window_left
        if call.window_right != -1:
            header.window_right = call.window_right
        if call.varlen:
            header.cu_seqlens_q.extend(int(x) for x in call.cu_seqlens_q)
            header.cu_seqlens_k.extend(int(x) for x in call.cu_seqlens_k)
        for name, (region_id, offset, byte_size) in call.refs.items():
            getattr(header, f"{name}_ref").CopyFrom(
                pb.TensorRef(region_id=region_id, offset=offset, byte_size=byte_size))
        if stream is None:
            # References keep the message small: never streamed (AttendStream takes none).
            size = header.ByteSize() + sum(b.nbytes + 16 for b in call.bits if b is not None)
            stream = not call.refs and size > self.stream_threshold_bytes
        if stream:
            response, out_bytes, lse_bytes, client = self._attend_stream(header, call.bits,
                                                                         timeout, start)
        else:
            response, out_bytes, lse_bytes, client = self._attend_unary(header, call.bits,
                                                                        timeout, start)

        unmarshal_start = time.perf_counter_ns()
        # Outputs written to regions are not in the response.
        out_inline = "out" not in call.refs
        lse_inline = call.return_lse and "lse" not in call.refs
        expected = call.out_bytes if out_inline else 0
        if (response.dtype != header.dtype or response.shape.num_heads != call.heads
                or response.shape.head_dim != call.head_dim
                or response.shape.batch != header.shape.batch):
            raise AttnServeError("Attend", self.address, grpc.StatusCode.INTERNAL,
                                 "response shape or dtype differs from the request")
        if len(out_bytes) != expected:
            raise AttnServeError("Attend", self.address, grpc.StatusCode.INTERNAL,
                                 f"response has {len(out_bytes)} output bytes, expected {expected}")
        expected_lse = call.lse_bytes if lse_inline else 0
        if len(lse_bytes) != expected_lse:
            raise AttnServeError("Attend", self.address, grpc.StatusCode.INTERNAL,
                                 f"response has {len(lse_bytes)} LSE bytes, expected {expected_lse}")
        out = tensors.from_wire(out_bytes, call.wire_dtype, call.shape, call.like) \
            if out_inline else None
        lse = np.frombuffer(lse_bytes, dtype="<f4").reshape(call.lse_shape).astype(np.float32) \
            if lse_inline else None
        t = response.timing
        return out, lse, dict(
            receive_ns=t.receive_ns, decode_ns=t.decode_ns, queue_ns=t.queue_ns,
            h2d_ns=t.h2d_ns, kernel_ns=t.kernel_ns, d2h_ns=t.d2h_ns, total_ns=t.total_ns,
            marshal_ns=client["marshal_ns"],
            unmarshal_ns=client["unmarshal_ns"] + time.perf_counter_ns() - unmarshal_start,
            upload_ns=client.get("upload_ns", 0), streamed=stream,
            request_id=response.request_id, kernel=response.kernel, backend=response.backend,
            device=response.device, kernel_tflops=response.kernel_tflops,
            **attend_call.path_fields((t.q_path, t.k_path, t.v_path, t.out_path, t.lse_path),
                                      call))

    def _attend_unary(self, header, bits, timeout, start):
        # The request is serialized here (header, then q, k, v appended as
        # length-delimited fields 6-8: the same bytes protobuf would write),
        # so each tensor is copied once, and marshal time is measurable.
        parts = [header.SerializeToString()]
        for (field, _), array in zip(_TENSOR_FIELDS, bits):
            if array is None:  # by reference (header.*_ref)
                continue
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
            raise rpc_error("AttendStream", self.address, error.code(),
                             error.details()) from None
        if header_response is None:
            raise AttnServeError("AttendStream", self.address, grpc.StatusCode.INTERNAL,
                                 "stream ended without a response")
        return header_response, bytes(out), bytes(lse), client
