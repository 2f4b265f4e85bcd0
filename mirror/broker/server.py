"""The broker's network side: Kafka framing, request headers, dispatch, orderly shutdown.

Each connection is served one request at a time, in order, as Kafka's SocketServer does
by muting a channel while its request is in flight; the answers to requests that arrived
together leave together, in one ``send`` (:class:`_Answers`). Requests are decoded and
responses encoded with kafka-python's generated schemas, except where a handler brings its own codec
(Produce requests and Fetch responses, whose record sets are not copied); a large fetch's
records go from the segment file to the socket with ``sendfile``, as Kafka's do. Anything a
client sends that cannot be a valid request (a frame over ``max_request_bytes``, an unknown
API key or version, a body that does not decode) closes that connection only; other clients
and the logs are unaffected.

On a TLS listener each connection first completes a TLS handshake, and only then is
served; one that fails (a plaintext client, a client certificate the client CA did not sign)
is logged with its reason and closed after OpenSSL's alert, which tells the client why
(:class:`.security.AlertingTlsProtocol`). On a SASL listener a connection is served only the
pre-authentication APIs until it authenticates, and is closed after a refused
authentication (:mod:`.security.session`).
"""

from __future__ import annotations

import asyncio
import logging
import ssl
import struct
import weakref

from .handlers import HANDLERS, api_versions
from .log import FileRegion
from .security import AlertingTlsProtocol, Credentials, Session, current_session, server_context
from .state import BrokerState, client_host

__all__ = ["BrokerServer"]

log = logging.getLogger(__name__)

_SIZE = struct.Struct(">i")
_HEADER_PREFIX = struct.Struct(">hhi")  # api_key, api_version, correlation_id: fixed in every header version


class BadRequest(Exception):
    """Ends one connection; never leaves this module."""


class BrokerServer:
    def __init__(self, state: BrokerState):
        self.state = state
        self._server: asyncio.base_events.Server | None = None
        self._connections: dict[asyncio.Task, bool] = {}  # task -> busy with a request
        security = state.config.security
        self._tls = server_context(security.tls) if security.tls is not None else None
        self._handshakes: weakref.WeakSet[AlertingTlsProtocol] = weakref.WeakSet()
        self._credentials = Credentials(security) if security.sasl_mechanisms else None

    async def start(self) -> int:
        config = self.state.config
        loop = asyncio.get_running_loop()
        self._server = await loop.create_server(self._protocol, config.host, config.port, reuse_address=True)
        port = self._server.sockets[0].getsockname()[1]
        self.state.bound_port = port
        return port

    def _protocol(self) -> asyncio.BaseProtocol:
        """A new connection's protocol, as ``asyncio.start_server`` makes it (a stream for
        :meth:`_serve`), behind TLS on a TLS listener."""
        stream = asyncio.StreamReaderProtocol(asyncio.StreamReader(), self._serve)
        if self._tls is None:
            return stream
        tls = AlertingTlsProtocol(stream, self._tls)
        self._handshakes.add(tls)
        return tls

    async def stop(self, grace_s: float = 10.0) -> None:
        """Stop accepting, let in-flight requests finish and answer, then drop idle connections."""
        self.state.stopping = True
        if self._server is not None:
            self._server.close()
        self.state.appended.notify()  # long-polling fetches return now
        for handshake in list(self._handshakes):
            handshake.abort_handshake()
        for task, busy in list(self._connections.items()):
            if not busy:
                task.cancel()
        pending = list(self._connections)
        if pending:
            _, late = await asyncio.wait(pending, timeout=grace_s)
            for task in late:
                task.cancel()
        if self._server is not None:
            await self._server.wait_closed()

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        task = asyncio.current_task()
        assert task is not None
        self._connections[task] = False
        peer = writer.get_extra_info("peername")
        client_host.set(f"/{peer[0]}" if peer else "")  # this connection's task only
        answers = _Answers(writer)
        try:
            session = Session(self._credentials, f"{peer[0]}:{peer[1]}" if peer else "?")
            current_session.set(session)
            while not self.state.stopping and not session.failed:
                frame = await self._read_frame(reader)
                if frame is None:
                    break
                self._connections[task] = True
                response = await self._handle(frame, session)
                if response is not None:
                    await self._send(answers, response)
                self._connections[task] = False
        except BadRequest as exc:
            log.warning("closing connection from %s: %s", peer, exc)
        except ssl.SSLError as exc:
            log.warning("closing connection from %s: TLS failed: %s", peer, exc.reason or exc)
        except (ConnectionError, asyncio.IncompleteReadError):
            pass
        except asyncio.CancelledError:
            pass
        except Exception:
            log.exception("closing connection from %s after an internal error", peer)
        finally:
            self._connections.pop(task, None)
            answers.flush()  # what was answered goes out before the connection closes
            writer.close()

    async def _read_frame(self, reader: asyncio.StreamReader) -> bytes | None:
        try:
            head = await reader.readexactly(4)
        except asyncio.IncompleteReadError as exc:
            if exc.partial:
                raise BadRequest("connection closed inside a frame size") from exc
            return None
        (size,) = _SIZE.unpack(head)
        if size < _HEADER_PREFIX.size or size > self.state.config.max_request_bytes:
            raise BadRequest(f"frame of {size} bytes outside 8..{self.state.config.max_request_bytes} (socket.request.max.bytes)")
        return await reader.readexactly(size)

    async def _send(self, answers: "_Answers", pieces: list[bytes | memoryview | FileRegion]) -> None:
        """Write a response. A small one (no file region, at most 64 KiB) waits for the end of
        the event loop's turn (:class:`_Answers`). A region of a log file (a fetch's records)
        goes with ``sendfile``, from the page cache to the socket, once what precedes it has
        gone; on a TLS socket, which must encrypt them, its bytes are read and written
        instead. The regions are closed once sent, or when the connection fails."""
        writer = answers.writer
        if _small(pieces):
            answers.defer(pieces)
            if writer.transport.get_write_buffer_size() > _DEFERRED_MAX:  # a client that does not read
                answers.flush()
                await writer.drain()
            return
        answers.flush()
        try:
            start = 0
            for i, piece in enumerate(pieces):
                if isinstance(piece, FileRegion):
                    writer.writelines(pieces[start:i])
                    start = i + 1
                    if self._tls is not None:
                        writer.write(piece.read())
                    elif piece.size:
                        if writer.transport.is_closing():  # sendfile would call it an internal error
                            raise ConnectionResetError("the client went away")
                        await asyncio.get_running_loop().sendfile(writer.transport, _RegionFile(piece), piece.position,
                                                                  piece.size, fallback=False)
            writer.writelines(pieces[start:] if start else pieces)
            await writer.drain()
        finally:
            for piece in pieces:
                if isinstance(piece, FileRegion):
                    piece.close()

    async def _handle(self, frame: bytes, session: Session) -> list[bytes | memoryview | FileRegion] | None:
        api_key, version, correlation_id = _HEADER_PREFIX.unpack_from(frame)
        handler = HANDLERS.get(api_key)
        if handler is None:
            raise BadRequest(f"unknown API key {api_key}")
        if not session.permits(api_key):
            raise BadRequest(f"{handler.API.request.__name__} before SASL authentication "
                             f"(only ApiVersions, SaslHandshake and SaslAuthenticate are served until then)")
        if not handler.API.min_version <= version <= handler.API.max_version:
            if api_key == api_versions.API.key:
                return [_encode(api_versions.fallback_response(), 0, correlation_id)]
            raise BadRequest(f"unsupported version {version} of API {api_key} (we serve {handler.API.min_version}-{handler.API.max_version})")
        try:
            if hasattr(handler, "decode"):
                request = handler.decode(memoryview(frame), version)
            else:
                request = handler.API.request.decode(frame, version=version, header=True)
        except Exception as exc:  # kafka-python raises assorted errors for malformed bodies, ours ProtocolError
            raise BadRequest(f"malformed {handler.API.request.__name__} v{version}: {exc!r}") from exc
        response = await handler.handle(request, version, self.state)
        if response is None:
            return None
        if hasattr(handler, "encode"):
            return handler.encode(response, version, correlation_id)
        return [_encode(response, version, correlation_id)]


def _encode(response, version: int, correlation_id: int) -> bytes:
    # Handlers build responses with version=...; passing it again to encode() would trip
    # kafka-python, which copies it into the (response) header as a request field.
    assert response.API_VERSION == version
    response.with_header(correlation_id=correlation_id)
    return bytes(response.encode(header=True, framed=True))


class _RegionFile:
    """What ``loop.sendfile`` takes for a file: a descriptor. asyncio's native path sends with
    ``os.sendfile`` at the offset it is given and then moves the file offset, which no reader
    of a log file uses (they all read at a position)."""

    __slots__ = ("_fd", "mode")

    def __init__(self, region: FileRegion):
        self._fd = region.fd
        self.mode = "rb"

    def fileno(self) -> int:
        return self._fd


_DEFERRED_MAX = 64 * 1024
"""Answers up to this size wait for the end of the event loop's turn; larger ones go at once."""


def _small(pieces: list[bytes | memoryview | FileRegion]) -> bool:
    """An answer that may wait: up to :data:`_DEFERRED_MAX` bytes, none of them in a file."""
    size = 0
    for piece in pieces:
        if isinstance(piece, FileRegion):
            return False
        size += piece.nbytes if isinstance(piece, memoryview) else len(piece)
    return size <= _DEFERRED_MAX


class _Answers:
    """A connection's small answers, written at the end of the event loop's turn. Requests
    that arrived together (a client with five in flight) are read and handled in one turn,
    with no wait between them; their answers then leave in one ``send``, one wake-up of the
    client instead of one each (a ``send`` is costly even on loopback, most of it waking the
    reader; figures: docs/performance.md, "Small costs behind choices in the code"). Order
    is kept: a larger answer first writes what waits. An answer never waits for a request
    that is not already read: the turn ends as soon as the connection waits for bytes, or a
    handler for anything (a long-polling fetch)."""

    __slots__ = ("writer", "_waiting", "_scheduled")

    def __init__(self, writer: asyncio.StreamWriter):
        self.writer = writer
        self._waiting: list[bytes | memoryview] = []
        self._scheduled = False

    def defer(self, answer: list[bytes | memoryview]) -> None:
        self._waiting += answer
        if not self._scheduled:
            self._scheduled = True
            asyncio.get_running_loop().call_soon(self.flush)

    def flush(self) -> None:
        self._scheduled = False
        if self._waiting and not self.writer.transport.is_closing():
            self.writer.writelines(self._waiting)
        self._waiting = []
