"""The client's exceptions, with or without grpcio installed.

With grpcio importable (the grpcio transport needs it), AttnServeError is a
grpc.RpcError and code() returns a grpc.StatusCode, exactly as before the
native transport existed. Without it (a GPU host with NumPy but no grpcio,
using the native transport), AttnServeError derives from Exception and
code() returns StatusCode below: an IntEnum with grpc.StatusCode's names and
gRPC's numbers, so `error.code().name == "INVALID_ARGUMENT"` holds either way.
"""

import enum

try:
    import grpc as _grpc
except ImportError:  # the native transport runs without grpcio
    _grpc = None


class StatusCode(enum.IntEnum):
    """gRPC status codes, by grpc.StatusCode's names, for hosts without grpcio."""

    OK = 0
    CANCELLED = 1
    UNKNOWN = 2
    INVALID_ARGUMENT = 3
    DEADLINE_EXCEEDED = 4
    NOT_FOUND = 5
    ALREADY_EXISTS = 6
    PERMISSION_DENIED = 7
    RESOURCE_EXHAUSTED = 8
    FAILED_PRECONDITION = 9
    ABORTED = 10
    OUT_OF_RANGE = 11
    UNIMPLEMENTED = 12
    INTERNAL = 13
    UNAVAILABLE = 14
    DATA_LOSS = 15
    UNAUTHENTICATED = 16


def status_code(number):
    """gRPC status number -> grpc.StatusCode when grpcio is importable, else StatusCode."""
    if _grpc is not None:
        for code in _grpc.StatusCode:
            if code.value[0] == number:
                return code
    try:
        return StatusCode(number)
    except ValueError:
        return StatusCode.UNKNOWN


_Base = _grpc.RpcError if _grpc is not None else Exception


class AttnServeError(_Base):
    """A failed call, caught as grpc.RpcError too when grpcio is installed:
    code() is the status code, details() the server's message, as on the
    errors gRPC raises itself."""

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


def rpc_error(rpc, address, code, details):
    """The AttnServeError (or its subclass for the code) of a failed call."""
    if code.name == "DEADLINE_EXCEEDED":
        return AttnServeTimeout(rpc, address, code, details)
    return AttnServeError(rpc, address, code, details)
