"""One blocking Kafka connection: framed requests out, framed responses in.

Requests and responses are encoded and decoded with kafka-python's generated schemas
(``kafka.protocol``); this module only frames them and matches correlation ids. Socket
failures become :class:`ConnectionFailedError`, replies that do not match their request
:class:`ProtocolError`, both under :class:`kcodecs.KMirrorError`.
"""

from __future__ import annotations

import importlib
import socket
import struct

from kcodecs import KMirrorError

__all__ = ["KafkaConnection", "ConnectionFailedError", "ProtocolError"]

_SIZE = struct.Struct(">i")


class ConnectionFailedError(KMirrorError):
    """The broker could not be reached, or the connection broke mid-request."""

    def __init__(self, address: str, reason: str):
        super().__init__(f"{address}: {reason}")
        self.address = address
        self.reason = reason


class ProtocolError(KMirrorError):
    """A response that does not fit its request (wrong correlation id, undecodable body)."""


class KafkaConnection:
    def __init__(self, address: str, *, timeout_s: float = 30, client_id: str = "kmirror"):
        host, _, port = address.rpartition(":")
        self.address = address
        self.client_id = client_id
        self._correlation_id = 0
        try:
            self.sock = socket.create_connection((host, int(port)), timeout=timeout_s)
        except (OSError, ValueError) as exc:
            raise ConnectionFailedError(address, f"cannot connect: {exc}") from exc
        self.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)

    def send(self, request, version: int) -> int:
        """Send ``request`` as ``version``; return its correlation id (no response is read)."""
        self._correlation_id += 1
        request.API_VERSION = version
        request.with_header(correlation_id=self._correlation_id, client_id=self.client_id)
        self.send_raw(bytes(request.encode(header=True, framed=True)))
        return self._correlation_id

    def call(self, request, version: int):
        """Send ``request`` and return its decoded response."""
        correlation_id = self.send(request, version)
        payload = self.read_frame()
        response_class = _response_class(request)
        try:
            response = response_class.decode(payload, version=version, header=True)
        except Exception as exc:  # kafka-python raises assorted errors on bad bytes
            raise ProtocolError(f"{self.address}: undecodable {response_class.__name__} v{version}: {exc!r}") from exc
        if response.header.correlation_id != correlation_id:
            raise ProtocolError(f"{self.address}: correlation id {response.header.correlation_id}, expected {correlation_id}")
        return response

    def send_raw(self, data: bytes) -> None:
        try:
            self.sock.sendall(data)
        except OSError as exc:
            raise ConnectionFailedError(self.address, f"send failed: {exc}") from exc

    def read_frame(self) -> bytes:
        (size,) = _SIZE.unpack(self._read(4))
        return self._read(size)

    def is_closed(self) -> bool:
        """True once the peer has closed the connection (blocks until it says something)."""
        try:
            return self.sock.recv(1) == b""
        except OSError:
            return True

    def _read(self, n: int) -> bytes:
        out = bytearray(n)
        view = memoryview(out)
        got = 0
        try:
            while got < n:
                chunk = self.sock.recv_into(view[got:], n - got)
                if chunk == 0:
                    raise ConnectionFailedError(self.address, "connection closed by the broker")
                got += chunk
        except OSError as exc:
            raise ConnectionFailedError(self.address, f"receive failed: {exc}") from exc
        return bytes(out)

    def close(self) -> None:
        self.sock.close()

    def __enter__(self) -> "KafkaConnection":
        return self

    def __exit__(self, *exc) -> None:
        self.close()


def _response_class(request):
    name = type(request).__name__.removesuffix("Request") + "Response"
    return getattr(importlib.import_module(type(request).__module__), name)
