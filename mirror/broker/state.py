"""What every request handler may touch: config, topics, producer ids, the transaction and
group coordinators, the clock, append signals, the client being served."""

from __future__ import annotations

import asyncio
import json
import os
import time
from contextvars import ContextVar
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Literal

from .cleaner import CleanerConfig
from .fetch_sessions import FetchSessionCache
from .log.files import fsync_dir
from .groups import GroupConfig, GroupCoordinator, GroupStateLog, OffsetsTopicMarkers
from .security import ListenerSecurity
from .topics import TopicStore
from .transactions import (DEFAULT_ID_EXPIRATION_MS, DEFAULT_MAX_TIMEOUT_MS, PartitionMarkers, TransactionCoordinator,
                           TransactionStateLog)

__all__ = ["BrokerConfig", "BrokerState", "Clock", "system_clock", "client_host"]

client_host: ContextVar[str] = ContextVar("client_host", default="")
"""The address of the client whose request is being handled, as Kafka's ``RequestContext``
prints it (``/127.0.0.1``); the server sets it for each connection, DescribeGroups reports it."""

Clock = Callable[[], int]
"""Milliseconds since the epoch; a seam so tests can control LogAppendTime and segment.ms."""


def system_clock() -> int:
    return time.time_ns() // 1_000_000


@dataclass(frozen=True)
class BrokerConfig:
    data_dir: Path
    host: str = "127.0.0.1"
    port: int = 9092
    node_id: int = 0
    advertised_host: str | None = None
    advertised_port: int | None = None
    auto_create_topics: bool = False
    default_partitions: int = 1
    flush: Literal["always", "os"] = "os"
    max_request_bytes: int = 100 * 1024 * 1024
    """Kafka's ``socket.request.max.bytes``: larger frames close the connection unread."""
    cluster_id: str = "kmirror-embedded"
    transaction_max_timeout_ms: int = DEFAULT_MAX_TIMEOUT_MS
    """Kafka's ``transaction.max.timeout.ms``: longer transaction timeouts are refused."""
    transaction_abort_interval_ms: int = 10_000
    """Kafka's ``transaction.abort.timed.out.transaction.cleanup.interval.ms``: how often the
    coordinator looks for timed-out transactions (and retries unwritten markers)."""
    transaction_version: int = 2
    """The finalized ``transaction.version`` feature (KIP-890): 2, Kafka 4.x's default, offers
    Produce v12 (a partition joins the transaction with its first batch) and EndTxn v5 (an
    epoch bump per transaction); 1 offers Produce v11 and EndTxn v4 at most, as Kafka 3.x
    brokers do, and clients add partitions with AddPartitionsToTxn."""
    transactional_id_expiration_ms: int = DEFAULT_ID_EXPIRATION_MS
    """Kafka's ``transactional.id.expiration.ms``: an id with no transaction and no request
    changing its state for this long is forgotten (seven days); it starts afresh, with a new
    producer id, at its next InitProducerId."""
    transaction_remove_expired_interval_ms: int = 3_600_000
    """Kafka's ``transaction.remove.expired.transaction.cleanup.interval.ms``: how often that
    is checked (an hour)."""
    groups: GroupConfig = GroupConfig()
    """The group coordinator's session timeout bounds, initial rebalance delay and the like."""
    cleaner: CleanerConfig = CleanerConfig()
    """The log cleaner of compacted topics: whether it runs, its offset map's memory, its backoff."""
    retention_check_interval_ms: int = 300_000
    """Kafka's ``log.retention.check.interval.ms``: how often retention runs on every partition,
    idle ones included (busy ones also check on each append)."""
    producer_id_expiration_ms: int = 86_400_000
    """Kafka's ``producer.id.expiration.ms`` (KIP-854): a partition forgets a producer that
    wrote nothing to it for this long and has no transaction open there (one day)."""
    producer_id_expiration_check_interval_ms: int = 600_000
    """Kafka's ``producer.id.expiration.check.interval.ms``: how often that is checked."""
    security: ListenerSecurity = ListenerSecurity()
    """TLS and SASL on the listener (``mirror.broker.security``); plaintext by default."""
    max_incremental_fetch_session_cache_slots: int = 1000
    """Kafka's ``max.incremental.fetch.session.cache.slots``: fetch sessions kept (KIP-227,
    :mod:`mirror.broker.fetch_sessions`)."""


class AppendSignal:
    """Wakes long-polling fetches when any partition grows (or the broker stops)."""

    def __init__(self) -> None:
        self._event = asyncio.Event()

    def notify(self) -> None:
        self._event.set()
        self._event = asyncio.Event()

    async def wait(self, timeout_s: float) -> None:
        try:
            await asyncio.wait_for(self._event.wait(), timeout_s)
        except asyncio.TimeoutError:
            pass


@dataclass
class BrokerState:
    config: BrokerConfig
    topics: TopicStore
    clock: Clock = system_clock
    appended: AppendSignal = field(default_factory=AppendSignal)
    producer_ids: "ProducerIdAllocator" = field(init=False)
    transactions: TransactionCoordinator = field(init=False)
    groups: GroupCoordinator = field(init=False)
    bound_port: int = 0
    stopping: bool = False
    fetch_sessions: FetchSessionCache = field(init=False)

    def __post_init__(self) -> None:
        self.fetch_sessions = FetchSessionCache(self.config.max_incremental_fetch_session_cache_slots)
        self.producer_ids = ProducerIdAllocator(self.config.data_dir / "producer-ids.json")
        self.groups = GroupCoordinator(GroupStateLog(self.config.data_dir / ".groups", flush=self.config.flush),
                                       self.clock, self.config.groups)
        self.topics.on_delete.append(self.groups.on_topic_deleted)
        self.transactions = TransactionCoordinator(
            TransactionStateLog(self.config.data_dir / ".transactions", flush=self.config.flush),
            self.producer_ids.allocate,
            OffsetsTopicMarkers(PartitionMarkers(self.topics.partition, self.clock, self.appended.notify), self.groups),
            self.clock,
            max_timeout_ms=self.config.transaction_max_timeout_ms,
            id_expiration_ms=self.config.transactional_id_expiration_ms,
        )

    @property
    def advertised(self) -> tuple[str, int]:
        return (self.config.advertised_host or self.config.host, self.config.advertised_port or self.bound_port)


class ProducerIdAllocator:
    """Hands out producer ids that are never reused, even across restarts and power loss
    (persisted and fsynced a block at a time, like Kafka's ``ProducerIdManager``): the
    transaction state log refers to them, so a reused id would merge two producers."""

    BLOCK = 1000

    def __init__(self, path: Path) -> None:
        self._path = path
        reserved = json.loads(path.read_text())["next_block_start"] if path.exists() else 0
        self._next = reserved
        self._limit = reserved

    def allocate(self) -> int:
        if self._next >= self._limit:
            self._limit = self._next + self.BLOCK
            tmp = self._path.with_suffix(".tmp")
            with open(tmp, "w") as out:
                out.write(json.dumps({"next_block_start": self._limit}))
                out.flush()
                os.fsync(out.fileno())
            os.replace(tmp, self._path)
            fsync_dir(self._path.parent)
        pid = self._next
        self._next += 1
        return pid
