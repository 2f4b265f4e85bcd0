"""A bare Kafka wire connection for tests: send any request (or any bytes), read the reply.

Requests are encoded with kafka-python's schemas, so what the broker receives is what a
real client would send, or exactly the garbage a test wants it to receive.
"""

from __future__ import annotations

import socket
import struct


class Wire:
    def __init__(self, bootstrap: str, timeout_s: float = 10):
        host, port = bootstrap.rsplit(":", 1)
        self.sock = socket.create_connection((host, int(port)), timeout=timeout_s)
        self.correlation_id = 0

    def send_request(self, request, version: int) -> int:
        self.correlation_id += 1
        request.API_VERSION = version
        request.with_header(correlation_id=self.correlation_id, client_id="wire-test")
        self.sock.sendall(bytes(request.encode(version=version, header=True, framed=True)))
        return self.correlation_id

    def call(self, request, version: int):
        correlation_id = self.send_request(request, version)
        payload = self.read_frame()
        response_class = request.__class__.__name__.replace("Request", "Response")
        module = __import__(request.__class__.__module__, fromlist=[response_class])
        response = getattr(module, response_class).decode(payload, version=version, header=True)
        assert response.header.correlation_id == correlation_id
        return response

    def send_raw(self, data: bytes) -> None:
        self.sock.sendall(data)

    def read_frame(self) -> bytes:
        (size,) = struct.unpack(">i", self._read(4))
        return self._read(size)

    def is_closed(self) -> bool:
        """True once the broker has closed this connection."""
        try:
            return self.sock.recv(1) == b""
        except (ConnectionResetError, BrokenPipeError):
            return True

    def _read(self, n: int) -> bytes:
        out = bytearray()
        while len(out) < n:
            chunk = self.sock.recv(n - len(out))
            if not chunk:
                raise ConnectionError("closed by the broker")
            out += chunk
        return bytes(out)

    def close(self) -> None:
        self.sock.close()
