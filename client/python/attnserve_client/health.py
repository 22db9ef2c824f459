"""The grpc.health.v1 Check call without generated stubs.

Debian's python3-grpcio has no grpc_health package, and the request and
response are one field each (service: string = 1; status: enum = 1), so
they are encoded here by hand.
"""

CHECK_METHOD = "/grpc.health.v1.Health/Check"

SERVICE_UNKNOWN = 3  # also what a NOT_FOUND answer means
STATUS_NAMES = {0: "UNKNOWN", 1: "SERVING", 2: "NOT_SERVING", SERVICE_UNKNOWN: "SERVICE_UNKNOWN"}


def encode_varint(value):
    """Protobuf base-128 varint encoding of a non-negative int."""
    out = bytearray()
    while value >= 0x80:
        out.append((value & 0x7F) | 0x80)
        value >>= 7
    out.append(value)
    return bytes(out)


def encode_request(service):
    """Serialized HealthCheckRequest for `service` ('' = the whole server)."""
    data = service.encode("utf-8")
    return b"\x0a" + encode_varint(len(data)) + data if data else b""


def _read_varint(data, pos):
    value, shift = 0, 0
    while True:
        if pos >= len(data) or shift > 63:
            raise ValueError("malformed HealthCheckResponse")
        byte = data[pos]
        pos += 1
        value |= (byte & 0x7F) << shift
        if not byte & 0x80:
            return value, pos
        shift += 7


def decode_response(data):
    """The status number of a serialized HealthCheckResponse (unknown fields skipped)."""
    status, pos = 0, 0
    while pos < len(data):
        tag, pos = _read_varint(data, pos)
        wire_type = tag & 7
        if wire_type == 0:
            value, pos = _read_varint(data, pos)
            if tag >> 3 == 1:
                status = value
        elif wire_type == 1:
            pos += 8
        elif wire_type == 2:
            length, pos = _read_varint(data, pos)
            pos += length
        elif wire_type == 5:
            pos += 4
        else:
            raise ValueError("malformed HealthCheckResponse")
        if pos > len(data):
            raise ValueError("malformed HealthCheckResponse")
    return status
