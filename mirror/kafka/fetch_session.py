"""A fetch session with one leader (KIP-227), the client's side: Kafka's ``FetchSessionHandler``
in one small type.

The broker keeps, per session, each partition's fetch offset and size as last asked. So the
session's next request names only the partitions whose offset or size changed (or that join
it) and those it stops fetching (``forgotten``); the others are fetched as the broker holds
them. The broker's answer carries only the partitions with records, an error, or a new high
watermark or log start offset: a copier following 10,000 idle partitions sends and reads a
few bytes per long poll, not 10,000 partitions each way.

The epochs (``FetchMetadata``): a request with epoch 0 is a full fetch asking for a session
(and closing the one it names, if any); the answer's session id, if not 0, starts the session
at epoch 1, and each answered request moves it on by one. Errors put the session back to a
full fetch, as Kafka's client does: FETCH_SESSION_ID_NOT_FOUND (the broker evicted it) starts
afresh, any other error (INVALID_FETCH_SESSION_EPOCH, ...) or a request whose answer was lost
sends a full fetch that closes the old session. One request at a time: the broker fetches every
partition it holds for the session, so a second request in flight would fetch them twice.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Mapping

import kafka.errors as kerr

from .types import TopicPartition

__all__ = ["FetchSession", "SessionRequest", "INITIAL_EPOCH", "FINAL_EPOCH"]

INITIAL_EPOCH = 0
"""A full fetch asking for a new session."""
FINAL_EPOCH = -1
"""A full fetch without a session (the only kind before Fetch v7)."""
_INT32_MAX = 2**31 - 1

Position = tuple[int, int]
"""A partition's fetch offset and ``partition_max_bytes``."""


@dataclass(frozen=True)
class SessionRequest:
    """What to send: the partitions to name (all of them in a full fetch), those to forget."""

    session_id: int
    epoch: int
    named: dict[TopicPartition, Position]
    forgotten: tuple[TopicPartition, ...]
    fetching: frozenset[TopicPartition]
    """Every partition the broker fetches for this request: named or held by the session."""

    @property
    def full(self) -> bool:
        return self.epoch in (INITIAL_EPOCH, FINAL_EPOCH)


@dataclass
class FetchSession:
    """The session with one leader: its id and next epoch, and what the broker holds for it."""

    session_id: int = 0
    epoch: int = INITIAL_EPOCH
    held: dict[TopicPartition, Position] = field(default_factory=dict)
    """As the broker holds the session's partitions once the last request sent is processed."""
    in_flight: SessionRequest | None = None
    _restart: bool = False

    def request(self, wanted: Mapping[TopicPartition, Position]) -> SessionRequest:
        """The next request, fetching exactly ``wanted``; the session then holds them."""
        if self.in_flight is not None:
            raise RuntimeError("a fetch session has one request in flight at a time")
        if self._restart:
            self.epoch, self._restart = INITIAL_EPOCH, False
        if self.epoch == INITIAL_EPOCH:
            request = SessionRequest(self.session_id, INITIAL_EPOCH, dict(wanted), (), frozenset(wanted))
        else:
            named = {tp: position for tp, position in wanted.items() if self.held.get(tp) != position}
            forgotten = tuple(tp for tp in self.held if tp not in wanted)
            request = SessionRequest(self.session_id, self.epoch, named, forgotten, frozenset(wanted))
        self.held = dict(wanted)
        self.in_flight = request
        return request

    def answered(self, error_code: int, session_id: int) -> None:
        """The answer to the request in flight came: the session's next epoch, or a full fetch."""
        sent, self.in_flight = self.in_flight, None
        if error_code == kerr.FetchSessionIdNotFoundError.errno:
            self.session_id, self.epoch = 0, INITIAL_EPOCH
        elif error_code:
            self.epoch = INITIAL_EPOCH  # a full fetch, closing this session
        elif session_id == 0:  # no session made (the broker's cache is full), or closed (nothing left in it)
            self.session_id, self.epoch = 0, INITIAL_EPOCH
        elif sent is not None and sent.full:
            self.session_id, self.epoch = session_id, 1
        else:
            self.epoch = 1 if self.epoch == _INT32_MAX else self.epoch + 1

    def restart(self) -> None:
        """The next request is a full fetch, closing this session (the partitions it holds are
        not the ones to fetch any more: a topic made again, fetched by its new id). A request
        in flight is answered first."""
        self._restart = True

    def lost(self) -> None:
        """The request in flight got no answer: what the broker holds is unknown, so the next
        request is a full fetch (closing the session, if the broker still has it)."""
        self.in_flight = None
        self.epoch = INITIAL_EPOCH
