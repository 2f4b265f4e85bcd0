"""A broker connection with several requests outstanding, and waiting on many such connections.

Kafka brokers answer the requests of one connection in the order they arrived, so a client
may send the next request before the previous answer is back (Kafka's
``max.in.flight.requests.per.connection``). :class:`PipelinedConnection` keeps the requests
still owed an answer in order, with whatever the caller needs to handle each answer;
:func:`wait_readable` is the single wait of a loop that drives several of them (fetches from
the source and produces to the destination overlap in one thread, as Kafka's ``NetworkClient.poll``
serves all of a client's connections).

A connection that fails is closed for good: :meth:`PipelinedConnection.abandon` hands back
every request still in flight, whose outcome is unknown, so the caller can retry them.
"""

from __future__ import annotations

import select
import time
from collections import deque
from dataclasses import dataclass
from typing import Any, Callable, Iterable, Sequence

from .broker_connection import BrokerConnection
from .connection import ProtocolError
from .frames import FrameBuffers

__all__ = ["InFlight", "PipelinedConnection", "wait_readable", "Encoder"]

Encoder = Callable[[int, int], Sequence[bytes | bytearray | memoryview]]
"""``(correlation_id, version) -> framed request pieces``, for hand-encoded requests."""


@dataclass(frozen=True)
class InFlight:
    """A request sent and not yet answered."""

    correlation_id: int
    version: int
    sent_at: float
    context: Any
    """The caller's: what the answer is about (the batches of a produce, the offsets of a fetch)."""


class PipelinedConnection:
    """One connection of the data plane's own, with up to ``max_in_flight`` unanswered requests."""

    def __init__(self, broker: BrokerConnection, max_in_flight: int, *, clock: Callable[[], float] = time.monotonic):
        if not 1 <= max_in_flight:
            raise ValueError(f"max_in_flight must be at least 1, not {max_in_flight}")
        self.broker = broker
        self.max_in_flight = max_in_flight
        self.in_flight: deque[InFlight] = deque()
        self._clock = clock
        self.closed = False

    @property
    def address(self) -> str:
        return self.broker.address

    def fileno(self) -> int:
        return self.broker.conn.fileno()

    def can_send(self) -> bool:
        return not self.closed and len(self.in_flight) < self.max_in_flight

    def send_encoded(self, request_class: type, encode: Encoder, context: Any, highest: int | None = None) -> InFlight:
        """Send a request framed by ``encode`` (the hot path's own codec, :mod:`mirror.protocol`) at the negotiated
        version (up to ``highest``, if given, instead of what :data:`~.broker_connection.SPOKEN` says)."""
        version = self.broker.version_of(request_class, highest)
        correlation_id = self.broker.conn.next_correlation_id()
        self.broker.conn.send_buffers(list(encode(correlation_id, version)))
        return self._sent(correlation_id, version, context)

    def receive(self, response_class, frames: FrameBuffers | None = None) -> tuple[InFlight, memoryview]:
        """The oldest request's answer: its :class:`InFlight` and the response body (after the
        header), a writable view of a buffer of its own (from ``frames`` if given). Blocks until
        the whole frame is in."""
        if not self.in_flight:
            raise ProtocolError(f"{self.address}: nothing in flight to receive")
        pending = self.in_flight[0]
        flexible = response_class.flexible_version_q(pending.version)
        body = self.broker.conn.receive_body(pending.correlation_id, flexible, response_class.__name__, frames)
        self.in_flight.popleft()
        return pending, body

    def oldest_sent_at(self) -> float | None:
        return self.in_flight[0].sent_at if self.in_flight else None

    def overdue(self, now: float, limit_s: float) -> bool:
        """Its oldest request in flight has waited more than ``limit_s`` for its answer (a
        request timeout: the connection counts as lost)."""
        sent = self.oldest_sent_at()
        return sent is not None and now - sent > limit_s

    def abandon(self) -> list[InFlight]:
        """Close the connection; return the requests that will never be answered on it."""
        self.closed = True
        self.broker.close()
        lost = list(self.in_flight)
        self.in_flight.clear()
        return lost

    def _sent(self, correlation_id: int, version: int, context: Any) -> InFlight:
        pending = InFlight(correlation_id, version, self._clock(), context)
        self.in_flight.append(pending)
        return pending


def wait_readable(connections: Iterable[PipelinedConnection], timeout_s: float, also: Sequence = ()) -> list:
    """The connections (among those awaiting answers) with bytes to read, within ``timeout_s``;
    and those of ``also`` (anything with a ``fileno``: a caller's own sockets) that are readable."""
    waiting = [conn for conn in connections if conn.in_flight and not conn.closed]
    if not waiting and not also:
        if timeout_s > 0:
            time.sleep(timeout_s)
        return []
    decrypted = [conn for conn in waiting if conn.broker.conn.buffered()]
    if decrypted:  # already read from the socket by TLS: select would wait for more
        return decrypted
    readable, _, _ = select.select([*waiting, *also], [], [], max(timeout_s, 0))
    return readable
