"""A TCP proxy that adds a fixed round-trip time: the WAN link of ``kmirror bench mirror --source-rtt-ms``.

On one machine the source cluster answers in microseconds, which hides what a mirror does
across a WAN: how many requests it keeps in flight and how long it waits on each round trip.
The bench puts a :class:`LatencyProxy` in front of each source broker and has that broker
*advertise* the proxy's address (pick the port first with :func:`free_port`, then configure
the broker's advertised listener with it), so that every connection a Kafka client makes to
the source, bootstrap and metadata-discovered alike, crosses the delay. One proxy serves one
upstream address; a cluster of several brokers needs one proxy per broker.

Delay model: each client connection gets one upstream connection, and the bytes of each
direction are held for a fixed one-way delay of ``rtt_ms / 2`` from the moment the proxy reads
them, so a request and its response gain ``rtt_ms`` together. Order is kept; there is no
jitter, no loss and no bandwidth cap: a direction is a queue of ``(due time, bytes)`` whose
writer sleeps only until the head chunk is due, so any number of chunks are in flight at once,
as on a real long link (sleeping in the reader instead would pass one chunk per delay).

Memory bound: a direction stops reading once more than :data:`MAX_QUEUED_BYTES` (64 MiB) wait
in its queue, and resumes when the writer has brought it back under. Add one read
(:data:`READ_BYTES`, 1 MiB), the stream reader's buffer (at most two reads) and the socket
transport's write buffer (64 KiB before ``drain`` waits), and a direction holds at most about
67 MiB, a connection about 134 MiB. The queue bound is also the bandwidth-delay product
beyond which the proxy *does* throttle: 64 MiB per ``rtt_ms / 2``, e.g. 1280 MiB/s at an RTT of
100 ms, well above what the bench moves over loopback.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import socket
import threading
from collections import deque
from dataclasses import dataclass, field
from types import TracebackType

__all__ = ["LatencyProxy", "free_port", "MAX_QUEUED_BYTES", "READ_BYTES"]

MiB = 1024 * 1024
READ_BYTES = 1 * MiB
"""Largest read per chunk: big enough that the per-chunk overhead does not limit bandwidth."""
MAX_QUEUED_BYTES = 64 * MiB
"""Bytes a direction may hold in its delay queue before it stops reading (see the module docstring)."""


def free_port(host: str = "127.0.0.1") -> int:
    """A TCP port that was free on ``host`` a moment ago, for a proxy's ``listen_port``.

    The broker's advertised listener must name the proxy's address before the broker starts,
    and so before the proxy could report a port of its own choosing. The port is released
    before it is returned, so another process could take it in between; on a test machine
    that is rare, and the proxy then fails to start rather than listening elsewhere.
    """
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind((host, 0))
        return sock.getsockname()[1]


@dataclass
class _DelayedPipe:
    """One direction of one proxied connection: bytes read from ``reader`` are written to
    ``writer`` ``delay_s`` seconds after they were read, in order."""

    reader: asyncio.StreamReader
    writer: asyncio.StreamWriter
    delay_s: float
    queue: deque[tuple[float, bytes]] = field(default_factory=deque)
    queued_bytes: int = 0
    eof: bool = False
    arrived: asyncio.Event = field(default_factory=asyncio.Event)
    """Set by the reader when it queues a chunk or reaches EOF: wakes a writer with nothing to do."""
    room: asyncio.Event = field(default_factory=asyncio.Event)
    """Set by the writer when the queue is back under the bound: wakes a paused reader."""

    async def run(self) -> None:
        """Both halves at once; when the source side ends, the destination is closed once
        every byte read before the end has been written."""
        async with asyncio.TaskGroup() as group:
            group.create_task(self._read())
            group.create_task(self._write())

    async def _read(self) -> None:
        loop = asyncio.get_running_loop()
        while True:
            while self.queued_bytes > MAX_QUEUED_BYTES:
                self.room.clear()
                await self.room.wait()
            data = await self.reader.read(READ_BYTES)
            if not data:
                break
            self.queue.append((loop.time() + self.delay_s, data))
            self.queued_bytes += len(data)
            self.arrived.set()
        self.eof = True
        self.arrived.set()

    async def _write(self) -> None:
        loop = asyncio.get_running_loop()
        while True:
            while not self.queue and not self.eof:
                self.arrived.clear()
                await self.arrived.wait()
            if not self.queue:
                break
            due, data = self.queue[0]
            # A loop: asyncio may run a timer up to its clock resolution early, and no chunk may
            # leave before its due time.
            while (wait := due - loop.time()) > 0:
                await asyncio.sleep(wait)
            self.queue.popleft()
            self.writer.write(data)
            await self.writer.drain()
            self.queued_bytes -= len(data)
            if self.queued_bytes <= MAX_QUEUED_BYTES:
                self.room.set()
        self.writer.close()


class LatencyProxy:
    """Listens on ``listen_host:listen_port`` (0: a free port) and relays every connection to
    ``upstream_host:upstream_port`` with ``rtt_ms`` added to each round trip.

    Runs its own asyncio event loop in a daemon thread, so the bench, which is synchronous,
    needs nothing but :meth:`start` and :meth:`stop` (or ``with``). When either side of a
    connection closes, the other side is closed once the bytes queued towards it are written;
    a half-close is not relayed as one (Kafka's clients and brokers do not use it).
    """

    def __init__(self, upstream_host: str, upstream_port: int, rtt_ms: float,
                 listen_host: str = "127.0.0.1", listen_port: int = 0) -> None:
        if rtt_ms < 0:
            raise ValueError(f"rtt_ms must be >= 0, not {rtt_ms}")
        self.upstream_host = upstream_host
        self.upstream_port = upstream_port
        self.rtt_ms = rtt_ms
        self.listen_host = listen_host
        self._listen_port = listen_port
        self._port: int | None = None
        self._thread: threading.Thread | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._stopping: asyncio.Event | None = None
        self._connections: set[asyncio.Task[None]] = set()

    @property
    def port(self) -> int:
        """The port the proxy listens on (the one the OS chose when ``listen_port`` was 0)."""
        if self._port is None:
            raise RuntimeError("LatencyProxy is not running: call start() first")
        return self._port

    @property
    def address(self) -> str:
        """``host:port`` to give clients, or a broker as its advertised listener."""
        return f"{self.listen_host}:{self.port}"

    def start(self) -> LatencyProxy:
        """Listen, in a thread of its own; returns once connections are accepted, or raises
        why the listener could not be opened (e.g. the port is taken)."""
        if self._thread is not None:
            raise RuntimeError("LatencyProxy already started")
        listening: concurrent.futures.Future[int] = concurrent.futures.Future()
        self._thread = threading.Thread(target=asyncio.run, args=(self._main(listening),),
                                        name=f"latency-proxy->{self.upstream_host}:{self.upstream_port}",
                                        daemon=True)
        self._thread.start()
        try:
            self._port = listening.result()
        except BaseException:
            self._thread.join()
            self._thread = None
            raise
        return self

    def stop(self) -> None:
        """Close the listener and every connection (bytes still queued are dropped), and join
        the thread. Does nothing if the proxy is not running."""
        thread, self._thread = self._thread, None
        if thread is None:
            return
        assert self._loop is not None and self._stopping is not None
        self._loop.call_soon_threadsafe(self._stopping.set)
        thread.join()
        self._port = None

    def __enter__(self) -> LatencyProxy:
        return self.start()

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.stop()

    async def _main(self, listening: concurrent.futures.Future[int]) -> None:
        self._loop = asyncio.get_running_loop()
        self._stopping = asyncio.Event()
        try:
            # limit: the stream reader's buffer pauses the socket at twice this, so it must
            # exceed READ_BYTES for reads of that size to happen.
            server = await asyncio.start_server(self._serve, self.listen_host, self._listen_port,
                                                limit=READ_BYTES)
        except BaseException as exc:
            listening.set_exception(exc)
            return
        listening.set_result(server.sockets[0].getsockname()[1])
        await self._stopping.wait()
        server.close()
        for task in self._connections:
            task.cancel()
        await asyncio.gather(*self._connections, return_exceptions=True)
        await server.wait_closed()

    async def _serve(self, client_reader: asyncio.StreamReader, client_writer: asyncio.StreamWriter) -> None:
        """The stream server's handler for one client connection, tracked so stop() can end it."""
        task = asyncio.current_task()
        assert task is not None
        self._connections.add(task)
        try:
            await self._relay(client_reader, client_writer)
        except asyncio.CancelledError:
            # stop() cancelled us. The task must end normally all the same: Python 3.11's stream
            # server calls exception() on its handler's task, which raises if it was cancelled.
            pass
        finally:
            self._connections.discard(task)

    async def _relay(self, client_reader: asyncio.StreamReader, client_writer: asyncio.StreamWriter) -> None:
        """Open this client's own upstream connection and run a delayed pipe each way. A failure
        (upstream refused, a reset) ends this connection only."""
        upstream_writer: asyncio.StreamWriter | None = None
        delay_s = self.rtt_ms / 2000
        try:
            upstream_reader, upstream_writer = await asyncio.open_connection(
                self.upstream_host, self.upstream_port, limit=READ_BYTES)
            async with asyncio.TaskGroup() as group:
                group.create_task(_DelayedPipe(client_reader, upstream_writer, delay_s).run())
                group.create_task(_DelayedPipe(upstream_reader, client_writer, delay_s).run())
        except* OSError:
            pass  # the peer went away or could not be reached: close both sides below
        finally:
            for writer in (client_writer, upstream_writer):
                if writer is not None:
                    writer.close()
                    with contextlib.suppress(OSError):
                        await writer.wait_closed()
