"""One blocking Kafka connection: framed requests out, framed responses in.

Requests and responses are encoded and decoded with kafka-python's generated schemas
(``kafka.protocol``), or by the hot path's own codec (:mod:`mirror.protocol`); this module
only frames them and matches correlation ids. Socket failures become
:class:`ConnectionFailedError`, replies that do not match their request :class:`ProtocolError`
(the protocol layer's, re-exported here), both under :class:`kcodecs.KMirrorError`. Given an SSL context, the
socket is TLS from the start (``security.protocol`` SSL or SASL_SSL); a certificate either
side refuses is an :class:`~.security.AuthenticationError`.
"""

from __future__ import annotations

import importlib
import socket
import ssl
import struct

from kafka.protocol.metadata import ApiVersionsResponse

from kcodecs import KMirrorError, VarintError, read_uvarint

from ..protocol.errors import ProtocolError
from .frames import FrameBuffers
from .security import tls_failure

__all__ = ["KafkaConnection", "ConnectionFailedError", "ProtocolError"]

_SIZE = struct.Struct(">i")
_IOV_MAX = 1024  # Linux's UIO_MAXIOV: the most buffers one sendmsg takes
READ_AHEAD = 64 * 1024
"""Bytes a connection reads from its socket at a time for small frames. A broker that answers
several pipelined requests at once (the embedded one does) sends their responses in one
write; read ahead, they come out of this buffer without a system call each (two ``recv``
and two ``poll`` per frame otherwise). A remainder this large or larger goes straight into
its frame's own buffer, so large fetch responses are not copied twice."""


class ConnectionFailedError(KMirrorError):
    """The broker could not be reached, or the connection broke mid-request."""

    def __init__(self, address: str, reason: str):
        super().__init__(f"{address}: {reason}")
        self.address = address
        self.reason = reason


class KafkaConnection:
    def __init__(self, address: str, *, timeout_s: float = 30, client_id: str = "kmirror",
                 connect_timeout_s: float | None = None, tls: ssl.SSLContext | None = None):
        host, _, port = address.rpartition(":")
        self.address = address
        self.client_id = client_id
        self._correlation_id = 0
        try:
            sock = socket.create_connection((host, int(port)), timeout=connect_timeout_s or timeout_s)
        except (OSError, ValueError) as exc:
            raise ConnectionFailedError(address, f"cannot connect: {exc}") from exc
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        try:
            self.sock = tls.wrap_socket(sock, server_hostname=host) if tls is not None else sock
            self.sock.settimeout(timeout_s)
        except OSError as exc:
            sock.close()
            raise (tls_failure(address, exc, handshake=True)
                   or ConnectionFailedError(address, f"TLS handshake failed: {exc}")) from exc
        self.tls = tls is not None
        self._heard = False
        """Whether a whole frame came from the broker: from then on a TLS error is no refusal."""
        self._ahead = memoryview(bytearray(READ_AHEAD))
        self._ahead_start = self._ahead_end = 0
        """``_ahead[_ahead_start:_ahead_end]``: bytes read from the socket, not yet taken."""

    def next_correlation_id(self) -> int:
        """A fresh correlation id, for a request framed by the caller (:meth:`send_buffers`)."""
        self._correlation_id += 1
        return self._correlation_id

    def send(self, request, version: int) -> int:
        """Send ``request`` as ``version``; return its correlation id (no response is read)."""
        correlation_id = self.next_correlation_id()
        request.API_VERSION = version
        request.with_header(correlation_id=correlation_id, client_id=self.client_id)
        # encode() returns a fresh bytearray; sending it as is saves a copy of every record set.
        self.send_raw(request.encode(header=True, framed=True))
        return correlation_id

    def send_buffers(self, buffers: list) -> None:
        """Send one framed request given as pieces, with ``sendmsg`` (scatter-gather): the record
        sets among them go to the socket without being joined into one buffer first."""
        if self.tls:  # SSL sockets have no sendmsg; encrypting copies the bytes anyway
            self.send_raw(b"".join(buffers))
            return
        pending = buffers
        try:
            while pending:
                head, rest = pending[:_IOV_MAX], pending[_IOV_MAX:]
                pending = _unsent(self.sock.sendmsg(head), head) + rest
        except OSError as exc:
            raise self._failure("send failed", exc) from exc

    def receive_body(self, correlation_id: int, flexible: bool, what: str,
                     frames: FrameBuffers | None = None) -> memoryview:
        """Read the next response frame and return its body (after the header) as a view of a
        buffer of our own (from ``frames`` if given), which the caller may rewrite in place."""
        payload = memoryview(self.read_frame(frames))
        try:
            (got,) = _SIZE.unpack_from(payload, 0)
            body = _header_size(payload, flexible)
        except (struct.error, IndexError, VarintError) as exc:
            raise ProtocolError(f"{self.address}: truncated {what} response header") from exc
        if got != correlation_id:
            raise ProtocolError(f"{self.address}: correlation id {got}, expected {correlation_id}")
        return payload[body:]

    def fileno(self) -> int:
        return self.sock.fileno()

    def buffered(self) -> bool:
        """Whether bytes already read wait here (read ahead, or decrypted in the TLS layer):
        ``select`` on the socket would not see them, so a reader must check this first."""
        return self._ahead_end > self._ahead_start or (self.tls and self.sock.pending() > 0)

    def call(self, request, version: int):
        """Send ``request`` and return its decoded response."""
        return self.receive(request, version, self.send(request, version))

    def receive(self, request, version: int, correlation_id: int):
        """Read and decode the response to ``request``, sent earlier as ``version`` with
        ``correlation_id``. Brokers answer in request order, so several requests may be sent
        on one connection before their responses are read."""
        response_class = _response_class(request)
        # The header is decoded here rather than by kafka-python, whose decode(header=True)
        # copies the whole payload (record sets included) into a BytesIO first.
        body = self.receive_body(correlation_id, _flexible_header(response_class, version), response_class.__name__)
        try:
            return response_class.decode(body, version=version)
        except Exception as exc:  # kafka-python raises assorted errors on bad bytes
            raise ProtocolError(f"{self.address}: undecodable {response_class.__name__} v{version}: {exc!r}") from exc

    def send_raw(self, data: bytes | bytearray) -> None:
        try:
            self.sock.sendall(data)
        except OSError as exc:
            raise self._failure("send failed", exc) from exc

    def read_frame(self, frames: FrameBuffers | None = None) -> bytearray | memoryview:
        """The next frame's bytes: a fresh bytearray, or a view of a buffer taken from ``frames``."""
        (size,) = _SIZE.unpack(self._read(4))
        if size < 0:
            raise ProtocolError(f"{self.address}: negative frame size {size}")
        if frames is None:
            frame: bytearray | memoryview = self._read(size)
        else:
            frame = memoryview(frames.take(size))[:size]
            self._fill(frame)
        self._heard = True
        return frame

    def is_closed(self) -> bool:
        """True once the peer has closed the connection (blocks until it says something)."""
        if self._ahead_end > self._ahead_start:
            return False
        try:
            return self.sock.recv(1) == b""
        except OSError:
            return True

    def _read(self, n: int) -> bytearray:
        out = bytearray(n)
        self._fill(memoryview(out))
        return out

    def _fill(self, view: memoryview) -> None:
        """Read exactly ``len(view)`` bytes into ``view``: what was read ahead first, then from
        the socket (see :data:`READ_AHEAD`)."""
        n = len(view)
        got = min(n, self._ahead_end - self._ahead_start)
        if got:
            view[:got] = self._ahead[self._ahead_start:self._ahead_start + got]
            self._ahead_start += got
            if got == n:
                return
        # Here nothing read ahead is left.
        try:
            while got < n:
                if n - got >= READ_AHEAD:
                    chunk = self.sock.recv_into(view[got:], n - got)
                else:
                    chunk = self.sock.recv_into(self._ahead, READ_AHEAD)
                    if chunk:
                        take = min(chunk, n - got)
                        view[got:got + take] = self._ahead[:take]
                        self._ahead_start, self._ahead_end = take, chunk
                        chunk = take
                if chunk == 0:
                    raise ConnectionFailedError(self.address, "connection closed by the broker")
                got += chunk
        except OSError as exc:
            raise self._failure("receive failed", exc) from exc

    def _failure(self, what: str, exc: OSError) -> KMirrorError:
        """A refused certificate is an authentication failure: TLS 1.3 reports the broker's
        refusal of ours at our first read, in an alert. Once the broker has answered, a TLS
        error is a broken connection, as Kafka's ``SslTransportLayer`` raises
        ``SslAuthenticationException`` only in its POST_HANDSHAKE state, before the first
        application data."""
        refused = None if self._heard else tls_failure(self.address, exc)
        return refused or ConnectionFailedError(self.address, f"{what}: {exc}")

    def close(self) -> None:
        self.sock.close()

    def __enter__(self) -> "KafkaConnection":
        return self

    def __exit__(self, *exc) -> None:
        self.close()


def _unsent(sent: int, pieces: list) -> list:
    """What is left of ``pieces`` once ``sent`` bytes of them went out. Nearly always nothing:
    the view to cut a piece at is made only for a partial send."""
    for i, piece in enumerate(pieces):
        size = piece.nbytes if type(piece) is memoryview else len(piece)
        if sent < size:
            return [memoryview(piece).cast("B")[sent:], *pieces[i + 1 :]]
        sent -= size
    return []


def _response_class(request):
    name = type(request).__name__.removesuffix("Request") + "Response"
    return getattr(importlib.import_module(type(request).__module__), name)


def _flexible_header(response_class, version: int) -> bool:
    # ApiVersionsResponse always has a v0 header, so a client can read it whatever it asked (KIP-511).
    return response_class.flexible_version_q(version) and response_class is not ApiVersionsResponse


def _header_size(payload: memoryview, flexible: bool) -> int:
    """ResponseHeader v0 is the correlation id; v1 (flexible versions, KIP-482) adds tagged fields."""
    if not flexible:
        return 4
    count, pos = read_uvarint(payload, 4)
    for _ in range(count):
        _tag, pos = read_uvarint(payload, pos)
        size, pos = read_uvarint(payload, pos)
        pos += size
    return pos
