"""KV-cache sessions (attention.proto's HoldSessions and the session calls).

A Session is one sequence's K/V cache across a model's layers, kept by the
server, so a decoding model sends only each step's new tokens:

    with client.open_session(num_layers=2, num_heads=32, kv_num_heads=8,
                             head_dim=128, max_tokens=4096) as session:
        out = session.attend(0, q, k, v)  # q [n, 32, 128], k/v [n, 8, 128]

Sessions belong to a lease: one HoldSessions call this client keeps open,
whose end (close(), the process exiting, the server stopping) closes every
session it holds. The lease and every session call go over one grpcio
channel of their own (SessionChannel), whatever the Client's transport,
because the server lets only the connection (or token identity) that holds
a lease name its sessions.

Arrays: NumPy as Client.attend takes them (fp16, bf16, float32 with the
session's dtype), or bf16/fp16 torch tensors (CPU or CUDA; results come back
as tensors on q's device).
"""

import dataclasses
import threading

import numpy as np

from . import tensors, torch_tensors

_DTYPES = {tensors.FP16: 1, tensors.BF16: 2}  # attention.proto's DType numbers


@dataclasses.dataclass
class StepResult:
    """One AttendSessions call's outputs, in the order of its steps."""

    outs: list           # per step: o [n, num_heads, head_dim], typed like that step's q
    lses: list           # per step: float32 [num_heads, n] (empty without return_lse)
    layer_tokens: list   # per step: the layer's cached tokens after the append
    response: object     # the AttendSessionsResponse (timing, kernel, backend), tensors cleared


class SessionChannel:
    """The grpcio channel, stub and lease of a client's sessions. Thread-safe."""

    def __init__(self, transport, own_transport=False):
        self.transport = transport          # a grpc_transport.GrpcTransport
        self.own_transport = own_transport  # opened for the sessions: closed with them
        self._lock = threading.Lock()
        self._lease = None

    @property
    def address(self):
        return self.transport.address

    def lease_id(self):
        """The open lease's id; a new lease when there is none. A lease that
        ended (the server stopped, the connection broke) took its sessions
        with it: their calls then get NOT_FOUND."""
        with self._lock:
            if self._lease is None or not self._lease.alive:
                self._lease = self.transport.hold("HoldSessions")
            return self._lease.id

    def call(self, rpc, request, timeout=None):
        return self.transport.unary(rpc, request, timeout)

    def close(self):
        with self._lock:
            if self._lease is not None:
                self._lease.end()
                self._lease = None


class Session:
    """A server-resident KV cache (SessionInfo fields as attributes).

    Calls on one session are the caller's to order: a call while another is
    in flight on it gets AttnServeError FAILED_PRECONDITION.
    """

    def __init__(self, channel, info):
        self._channel = channel
        self._closed = False
        self._update(info)
        self.dtype = tensors.FP16 if info.config.dtype == _DTYPES[tensors.FP16] else tensors.BF16

    def _update(self, info):
        self.info = info
        self.id = info.session_id
        self.layer_tokens = list(info.layer_tokens)
        self.page_tokens = info.page_tokens

    def __repr__(self):
        return f"Session({self.id[:8]}…, layer_tokens={self.layer_tokens})"

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def attend(self, layer, q, k, v, *, return_lse=False, timeout=None):
        """Appends k, v ([n, kv_num_heads, head_dim]) to `layer`'s cache and
        returns o [n, num_heads, head_dim] for q ([n, num_heads, head_dim]),
        causal over the whole cache; (o, lse) with return_lse."""
        result = attend_sessions(self._channel, layer, [(self, q, k, v)],
                                 return_lse=return_lse, timeout=timeout)
        return (result.outs[0], result.lses[0]) if return_lse else result.outs[0]

    def fork(self, timeout=None):
        """A new session sharing this one's cached tokens (pages copy-on-write)."""
        from attnserve.v1 import attention_pb2 as pb

        response = self._channel.call("ForkSession", pb.ForkSessionRequest(
            lease_id=self._channel.lease_id(), session_id=self.id), timeout)
        return Session(self._channel, response.session)

    def truncate(self, tokens, timeout=None):
        """Drops the last `tokens` tokens from every layer (rejected speculative tokens)."""
        from attnserve.v1 import attention_pb2 as pb

        response = self._channel.call("TruncateSession", pb.TruncateSessionRequest(
            lease_id=self._channel.lease_id(), session_id=self.id, tokens=int(tokens)), timeout)
        self._update(response.session)

    def close(self, timeout=None):
        """Closes the session (its pages go back to the pool); idempotent."""
        from attnserve.v1 import attention_pb2 as pb

        if self._closed:
            return
        self._closed = True
        self._channel.call("CloseSession", pb.CloseSessionRequest(
            lease_id=self._channel.lease_id(), session_id=self.id), timeout)


def open_session(channel, *, num_layers, num_heads, head_dim, max_tokens, kv_num_heads=0,
                 dtype=tensors.BF16, softmax_scale=None, window_left=None, reserve=False,
                 timeout=None):
    """A new Session in the channel's lease (Client.open_session documents the arguments)."""
    from attnserve.v1 import attention_pb2 as pb

    config = pb.SessionConfig(dtype=_DTYPES[tensors.parse_dtype(dtype)],
                              num_layers=int(num_layers), num_heads=int(num_heads),
                              kv_num_heads=int(kv_num_heads), head_dim=int(head_dim),
                              max_tokens=int(max_tokens), reserve=bool(reserve))
    if softmax_scale is not None:
        config.softmax_scale = float(softmax_scale)
    if window_left is not None:
        config.window_left = int(window_left)
    response = channel.call("OpenSession", pb.OpenSessionRequest(
        lease_id=channel.lease_id(), config=config), timeout)
    return Session(channel, response.session)


def _bits(tensor, dtype, name):
    """(uint16 bits [n, heads, d], its NumPy dtype or torch tensor to shape outputs after)."""
    if torch_tensors.torch_of(tensor) is not None:
        bits, wire = torch_tensors.to_bits(tensor, name)
        if wire != dtype:
            raise ValueError(f"{name} is {wire} but the session is {dtype}")
        if bits.ndim != 3:
            raise ValueError(f"{name} is [tokens, heads, head_dim]; got shape {tuple(bits.shape)}")
        return bits, tensor
    wire, _, bits = tensors.to_wire(tensor, dtype, ndim=3)
    return bits, np.asarray(tensor).dtype


def attend_sessions(channel, layer, steps, *, return_lse=False, timeout=None, request_id=""):
    """One AttendSessions call: `steps` is [(session, q, k, v), ...], distinct
    sessions of one geometry; returns a StepResult."""
    from attnserve.v1 import attention_pb2 as pb

    if not steps:
        raise ValueError("steps is empty: name at least one (session, q, k, v)")
    request = pb.AttendSessionsRequest(lease_id=channel.lease_id(), layer=int(layer),
                                       return_lse=bool(return_lse), request_id=request_id)
    parts = {"q": [], "k": [], "v": []}
    likes = []
    for session, q, k, v in steps:
        bits = {}
        for name, tensor in (("q", q), ("k", k), ("v", v)):
            bits[name], like = _bits(tensor, session.dtype, name)
            if name == "q":
                likes.append((like, bits[name].shape))
        if not bits["q"].shape[0] == bits["k"].shape[0] == bits["v"].shape[0]:
            raise ValueError(f"session {session.id[:8]}…: q, k and v must have the same tokens, "
                             f"got {bits['q'].shape[0]}, {bits['k'].shape[0]}, "
                             f"{bits['v'].shape[0]}")
        request.steps.add(session_id=session.id, tokens=int(bits["q"].shape[0]))
        for name in parts:
            parts[name].append(bits[name])
    request.q = np.concatenate(parts["q"]).tobytes()
    request.k = np.concatenate(parts["k"]).tobytes()
    request.v = np.concatenate(parts["v"]).tobytes()
    response = channel.call("AttendSessions", request, timeout)

    out_bits = np.frombuffer(response.out, dtype="<u2")
    lse = np.frombuffer(response.lse, dtype="<f4") if return_lse else None
    total = sum(shape[0] for _, shape in likes)
    heads = likes[0][1][1]
    if lse is not None:
        lse = lse.reshape(heads, total)
    outs, lses, start = [], [], 0
    wire = steps[0][0].dtype
    for (like, shape), (session, *_), tokens in zip(likes, steps, response.layer_tokens):
        count = int(np.prod(shape))
        bits = out_bits[start * shape[1] * shape[2]:][:count].reshape(shape).copy()
        if torch_tensors.torch_of(like) is not None:
            outs.append(torch_tensors.from_bits(bits, like))
        else:
            outs.append(tensors.bits_as_output(bits, wire, like))
        if lse is not None:
            part = np.ascontiguousarray(lse[:, start:start + shape[0]])
            lses.append(torch_tensors.to_device(part, like)
                        if torch_tensors.torch_of(like) is not None else part)
        session.layer_tokens[int(layer)] = int(tokens)
        start += shape[0]
    layer_tokens = list(response.layer_tokens)
    response.out = b""
    response.lse = b""
    return StepResult(outs=outs, lses=lses, layer_tokens=layer_tokens, response=response)


def list_sessions(channel, timeout=None):
    """The SessionInfo messages of the channel's lease."""
    from attnserve.v1 import attention_pb2 as pb

    response = channel.call("ListSessions", pb.ListSessionsRequest(lease_id=channel.lease_id()),
                            timeout)
    return list(response.sessions)
