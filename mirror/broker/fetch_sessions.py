"""Fetch sessions (KIP-227), served as Kafka's ``FetchSession.scala`` serves them.

A consumer following thousands of partitions would otherwise name every one of them in every
Fetch, and get every one back in every answer, idle or not. With a session the broker keeps
what the client last asked for each partition (offset, size), so that:

- a request names only the partitions whose offset or size changed, and those it stops
  fetching (``forgotten_topics_data``); the rest are fetched as the session holds them;
- an answer carries only the partitions with records, an error, or a new high watermark or
  log start offset since the session's last answer (``CachedPartition.maybeUpdateResponseData``).

The request's ``session_id`` and ``session_epoch`` say which kind it is (``FetchManager.newContext``):

============  ======  ========================================================================
session_id    epoch   meaning
============  ======  ========================================================================
0             -1      a full fetch without a session (:class:`Sessionless`)
0 or an id    0       a full fetch that closes that session, if any, and asks for a new one
                      (:class:`Full`); the answer names the new session's id, or 0 if the cache
                      had no room
an id         -1      close the session; a full fetch without one
an id         n > 0   the session's next request (:class:`Incremental`): its epoch must be the
                      session's (FETCH_SESSION_ID_NOT_FOUND for an unknown id,
                      INVALID_FETCH_SESSION_EPOCH for another epoch; the client then starts a
                      full fetch again). A session left with no partition is closed, and the
                      answer has session id 0
============  ======  ========================================================================

Partitions are read in the session's order, and one that returned records moves to the end,
so that a broker that fills an answer up to ``max_bytes`` serves every partition in turn.

The cache holds ``max_incremental_fetch_session_cache_slots`` sessions (Kafka's default 1,000).
When it is full, a new session evicts one unused for longer than 120 s
(``MIN_INCREMENTAL_FETCH_SESSION_EVICTION_MS``), or else the smallest session older than that
if the new one has more partitions (``FetchSessionCacheShard.tryEvict``; every session here is
a consumer's, none is privileged). A client whose session was evicted gets
FETCH_SESSION_ID_NOT_FOUND at its next request.
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field
from typing import Iterable

from ..protocol import FetchedPartition
from .errors import kerr

__all__ = ["FetchSessionCache", "Wanted", "Sessionless", "Full", "Incremental", "SessionError",
           "EVICTION_MS", "next_epoch"]

EVICTION_MS = 120_000
"""How long a session must go unused before any new one may evict it (Kafka's
``MIN_INCREMENTAL_FETCH_SESSION_EVICTION_MS``)."""
INITIAL_EPOCH = 0
FINAL_EPOCH = -1
_INT32_MAX = 2**31 - 1


def next_epoch(epoch: int) -> int:
    """Kafka's ``FetchMetadata.nextEpoch``: the epoch after ``epoch``, wrapping to 1."""
    if epoch < 0:
        return FINAL_EPOCH
    return 1 if epoch == _INT32_MAX else epoch + 1


@dataclass(frozen=True)
class Wanted:
    """One partition to read: where from, and at most how much of it."""

    topic: str
    partition: int
    fetch_offset: int
    max_bytes: int


@dataclass
class _Cached:
    """A session's partition (Kafka's ``CachedPartition``): what the client last asked, and the
    high watermark and log start offset the session last answered with (-1: not yet)."""

    fetch_offset: int
    max_bytes: int
    high_watermark: int = -1
    log_start_offset: int = -1

    def must_respond(self, part: FetchedPartition) -> bool:
        """Whether ``part`` goes in the answer, updating what the session last answered."""
        respond = len(part.records) > 0
        if part.high_watermark != self.high_watermark:
            respond, self.high_watermark = True, part.high_watermark
        if part.log_start_offset != self.log_start_offset:
            respond, self.log_start_offset = True, part.log_start_offset
        if part.error_code:
            # Sent again once the error goes away: the session has not seen a watermark.
            respond, self.high_watermark = True, -1
        return respond


@dataclass(eq=False)
class _Session:
    id: int
    partitions: dict[tuple[str, int], _Cached]
    """In reading order (insertion order of the dict)."""
    created_ms: int
    last_used_ms: int
    epoch: int = 1


@dataclass(frozen=True)
class SessionError:
    """The request named a session the broker cannot use: answered with ``error_code`` alone."""

    error_code: int
    wanted: tuple[Wanted, ...] = ()

    def respond(self, partitions: list[FetchedPartition], now_ms: int) -> tuple[int, list[FetchedPartition]]:
        return 0, []


@dataclass(frozen=True)
class Sessionless:
    """A full fetch with no session: every partition asked is answered."""

    wanted: tuple[Wanted, ...]
    error_code: int = 0

    def respond(self, partitions: list[FetchedPartition], now_ms: int) -> tuple[int, list[FetchedPartition]]:
        return 0, partitions


@dataclass(frozen=True)
class Full:
    """A full fetch asking for a session: answered whole, and the session made from it."""

    wanted: tuple[Wanted, ...]
    cache: "FetchSessionCache"
    error_code: int = 0

    def respond(self, partitions: list[FetchedPartition], now_ms: int) -> tuple[int, list[FetchedPartition]]:
        cached = {}
        for want, part in zip(self.wanted, partitions, strict=True):
            entry = cached[(want.topic, want.partition)] = _Cached(want.fetch_offset, want.max_bytes)
            entry.must_respond(part)
        return self.cache.maybe_create(cached, now_ms), partitions


@dataclass(frozen=True)
class Incremental:
    """A session's next request: its partitions, as the session holds them, are read; the
    answer keeps only those that must respond, and those with records move to the end."""

    session: _Session
    wanted: tuple[Wanted, ...]
    error_code: int = 0

    def respond(self, partitions: list[FetchedPartition], now_ms: int) -> tuple[int, list[FetchedPartition]]:
        kept = []
        held = self.session.partitions
        for part in partitions:
            key = (part.topic, part.partition)
            entry = held[key]
            if entry.must_respond(part):
                kept.append(part)
                if len(part.records):
                    held[key] = held.pop(key)  # to the end: the others are read first next time
        return self.session.id, kept


FetchContext = Sessionless | Full | Incremental | SessionError


@dataclass
class FetchSessionCache:
    """The broker's sessions (Kafka's ``FetchSessionCacheShard``, one shard)."""

    max_entries: int = 1000
    eviction_ms: int = EVICTION_MS
    _sessions: dict[int, _Session] = field(default_factory=dict)
    _random: random.Random = field(default_factory=random.Random)

    def __len__(self) -> int:
        return len(self._sessions)

    def context(self, session_id: int, epoch: int, wanted: Iterable[Wanted], forgotten: Iterable[tuple[str, int]],
                now_ms: int) -> FetchContext:
        """How to serve a request with these session fields (the module's table)."""
        wanted = tuple(wanted)
        if epoch in (INITIAL_EPOCH, FINAL_EPOCH):
            self._sessions.pop(session_id, None)  # any session a full fetch names is closed
            return Sessionless(wanted) if epoch == FINAL_EPOCH else Full(wanted, self)
        session = self._sessions.get(session_id)
        if session is None:
            return SessionError(kerr.FetchSessionIdNotFoundError.errno)
        if session.epoch != epoch:
            return SessionError(kerr.InvalidFetchSessionEpochError.errno)
        for want in wanted:
            entry = session.partitions.get((want.topic, want.partition))
            if entry is None:
                session.partitions[(want.topic, want.partition)] = _Cached(want.fetch_offset, want.max_bytes)
            else:
                entry.fetch_offset, entry.max_bytes = want.fetch_offset, want.max_bytes
        for key in forgotten:
            session.partitions.pop(tuple(key), None)
        if not session.partitions:
            del self._sessions[session.id]
            return Sessionless(wanted)
        session.last_used_ms = now_ms
        session.epoch = next_epoch(session.epoch)
        held = tuple(Wanted(topic, partition, entry.fetch_offset, entry.max_bytes)
                     for (topic, partition), entry in session.partitions.items())
        return Incremental(session, held)

    def maybe_create(self, partitions: dict[tuple[str, int], _Cached], now_ms: int) -> int:
        """A new session of ``partitions``, its id; 0 when there is no room and nothing may be evicted."""
        if len(self._sessions) >= self.max_entries and not self._evict(len(partitions), now_ms):
            return 0
        session_id = 0
        while session_id == 0 or session_id in self._sessions:
            session_id = self._random.randint(1, _INT32_MAX)
        self._sessions[session_id] = _Session(session_id, partitions, now_ms, now_ms)
        return session_id

    def _evict(self, size: int, now_ms: int) -> bool:
        """Kafka's ``tryEvict``: the least recently used session if it is stale, else the
        smallest one old enough to be evicted, if the new session is larger."""
        if not self._sessions:
            return False
        least_used = min(self._sessions.values(), key=lambda s: (s.last_used_ms, s.id))
        if now_ms - least_used.last_used_ms > self.eviction_ms:
            del self._sessions[least_used.id]
            return True
        old = [s for s in self._sessions.values() if now_ms - s.created_ms > self.eviction_ms]
        if not old:
            return False
        smallest = min(old, key=lambda s: (len(s.partitions), s.id))
        if size <= len(smallest.partitions):
            return False
        del self._sessions[smallest.id]
        return True
