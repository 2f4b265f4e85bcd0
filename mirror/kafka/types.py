"""Values shared by the client, the routing code and the Spark source: partitions, fetched
data, topics to create. Frozen, so they can be dict keys and cross process boundaries.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from types import MappingProxyType
from uuid import UUID
from typing import Mapping, NamedTuple

from kcodecs import KMirrorError

__all__ = ["TopicPartition", "InvalidTopicPartitionError", "FetchedData", "NewTopic", "TopicListing"]


class InvalidTopicPartitionError(KMirrorError, ValueError):
    """Text that does not parse as ``topic/partition`` (:meth:`TopicPartition.parse`). Defined
    here, beside the parser, and re-exported by :mod:`.errors`, so this module needs nothing
    from the client's errors and the two do not import each other."""


class TopicPartition(NamedTuple):
    """A topic's partition. A NamedTuple, not a frozen dataclass: the copy looks partitions
    up in dicts about six times per batch, and a tuple hashes and compares in C, several times
    faster than the dataclass's generated ``__hash__`` and ``__eq__`` (figures:
    docs/performance.md, "Small costs behind choices in the code"). It is immutable, ordered by topic then partition,
    and equal to the plain tuple of its fields."""

    topic: str
    partition: int

    def __str__(self) -> str:
        # Also the key of the Spark offset JSON ({"topic/partition": next_offset}); topic names
        # cannot contain '/' (Kafka's Topic.LEGAL_CHARS is [a-zA-Z0-9._-]).
        return f"{self.topic}/{self.partition}"

    @classmethod
    def parse(cls, text: str) -> "TopicPartition":
        """The inverse of :meth:`__str__`."""
        topic, sep, partition = text.rpartition("/")
        if not sep or not topic or not partition.isdigit():
            raise InvalidTopicPartitionError(f"not a topic/partition: {text!r}")
        return cls(topic, int(partition))


@dataclass(frozen=True)
class FetchedData:
    records: bytes | memoryview
    """The partition's record-set bytes exactly as the broker sent them (may end in a partial batch)."""
    high_watermark: int
    log_start_offset: int
    """-1 when the broker did not say."""
    last_stable_offset: int
    """Below it every transaction is decided (KIP-98); a read_committed fetch stops there. -1 when
    the broker did not say."""
    aborted_transactions: tuple[tuple[int, int], ...]
    """``(producer_id, first_offset)`` of every aborted transaction overlapping the fetched range
    (read_committed fetches only; empty otherwise): what the reader needs to leave their batches
    out (:class:`~mirror.routing.ReadCommitted`)."""


@dataclass(frozen=True)
class NewTopic:
    name: str
    partitions: int
    configs: Mapping[str, str] = field(default_factory=lambda: MappingProxyType({}))
    replication_factor: int = -1
    """-1 asks for the broker's default (``default.replication.factor``, KIP-464)."""


@dataclass(frozen=True)
class TopicListing:
    """A topic as Metadata lists it: its partition count and its identity (KIP-516, Metadata
    v10+). ``topic_id`` is None from a cluster that gives none (before Kafka 2.8, or Metadata
    older than v10): a topic deleted and made again under its name is then the same topic."""

    partitions: int
    topic_id: UUID | None

    @property
    def id_text(self) -> str | None:
        """``topic_id`` as kmirror writes it in its state (commits, syncs, provenance, plans)."""
        return None if self.topic_id is None else str(self.topic_id)


def listed_ids(listings: Mapping[str, TopicListing]) -> dict[str, str]:
    """Each listed topic's id as text (:attr:`TopicListing.id_text`), for the topics that have one."""
    return {topic: listing.id_text for topic, listing in listings.items() if listing.topic_id is not None}
