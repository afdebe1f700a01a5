"""One Kafka request over a fresh socket, for e2e tests that speak the wire themselves (old protocol versions,
hand-built refusals): the request encoded by kafka-python's own classes, the response decoded by its class."""

from __future__ import annotations

import socket
import struct
from typing import Any


def call_once(port: int, request: Any, response_cls: Any) -> Any:
    """One request over a fresh socket; the response decoded by the request's own response class."""
    request.with_header(correlation_id=7, client_id="old-client")
    with socket.create_connection(("127.0.0.1", port), timeout=15) as sock:
        sock.sendall(bytes(request.encode(header=True, framed=True)))
        size = struct.unpack(">i", read_exactly(sock, 4))[0]
        frame = read_exactly(sock, size)
    response = response_cls.decode(frame, version=request.version, header=True)
    assert response.header.correlation_id == 7
    return response


def read_exactly(sock: socket.socket, n: int) -> bytes:
    """`n` bytes from `sock`; fails the test if the server closes the connection first."""
    buf = b""
    while len(buf) < n:
        chunk = sock.recv(n - len(buf))
        assert chunk, "the server closed the connection"
        buf += chunk
    return buf
