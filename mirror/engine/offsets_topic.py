"""The mirror's record of what it copied, kept on the destination: ``kmirror-offsets.<job>``.

Under exactly-once delivery each copy task commits, in the same destination transaction as
the records it copied, one record per source partition saying where the copy got to:

- key: ``{"topic": "orders", "partition": 3}`` (JSON), the source partition;
- value: ``{"offset": 1234, "topic_id": "…"}``, the next source offset to copy, and the id of
  the source topic it is an offset of (KIP-516; left out for a cluster without ids, and by
  kmirror before issue 70).

A topic deleted and made again under its name is another topic, whose offsets start again:
a commit of the old topic says nothing of the new one. Readers ask for the commits of the
topic id they copy (:meth:`CommittedOffsets.latest`) and get none of another's; a commit
without an id (written before ids were kept) is taken for any, as before.

Like MirrorMaker 2's ``mm2-offsets``, the topic is compacted (the last value of each key is
all that matters) and has one partition, so one ordered read gives every task's progress.
Because records and offsets commit together, the destination itself says what was copied:
a task replayed after a crash reads these offsets first and skips what an earlier attempt
already committed (:mod:`.exactly_once`). Spark's checkpoint is the plan; this is the truth.

A task or copier starting asks only for its own partitions (:meth:`CommittedOffsets.latest`):
read from the end, read_uncommitted, each transaction decided by its marker, so only an open
transaction that wrote those partitions holds it up (:func:`~.topic_tail.latest_by_key`). The
whole view (:meth:`CommittedOffsets.refresh`) is read_committed and goes to the end as it was
when the read began, waiting for open transactions below it; it is kept per process and each
read only fetches what is new.

Resident copiers commit every few milliseconds (:mod:`.copier`), so the topic grows by a few
hundred records a second under load: a day is tens of millions. Two things keep a start-up's
read short. The topic rolls a segment every ten minutes and is cleaned from a tenth dirty on,
its commit markers dropped ten minutes after their records (``segment.ms``,
``min.cleanable.dirty.ratio``, ``delete.retention.ms``), so compaction keeps up; and a copier
starting reads only the end of it (:meth:`CommittedOffsets.latest`): every commit writes all
of a copier's partitions, so the last commit alone says where they are.
"""

from __future__ import annotations

import json
from typing import Iterable, Mapping, NamedTuple

import kcodecs
from kcodecs import KMirrorError, Record

from ..kafka import KafkaClient, NewTopic, TopicPartition
from .topic_tail import CommittedTail, latest_by_key

__all__ = ["OFFSETS_TOPIC_PREFIX", "offsets_topic", "offsets_topic_spec", "encode_offsets", "decode_offsets",
           "Commit", "CommittedOffsets", "OffsetsTopicError"]

OFFSETS_TOPIC_PREFIX = "kmirror-offsets."


class OffsetsTopicError(KMirrorError):
    """The offsets topic holds a record kmirror did not write."""


def offsets_topic(job: str) -> str:
    return OFFSETS_TOPIC_PREFIX + job


COMPACTION = {"cleanup.policy": "compact", "segment.ms": str(10 * 60_000), "min.cleanable.dirty.ratio": "0.1",
              "delete.retention.ms": str(10 * 60_000)}
"""The offsets topic's configs: compacted, and cleaned often enough to keep up with copiers."""


def offsets_topic_spec(job: str) -> NewTopic:
    """One partition, compacted: every task's progress in one ordered log, last value per key."""
    return NewTopic(offsets_topic(job), 1, configs=dict(COMPACTION))


class Commit(NamedTuple):
    """A source partition's committed offset, the id of the topic it is an offset of, and the id
    of the destination topic it was copied into (each None: not known, a cluster without ids or
    a commit from before they were kept)."""

    offset: int
    topic_id: str | None = None
    destination_id: str | None = None

    def of(self, topic_id: str | None, destination_id: str | None = None) -> bool:
        """Whether this commit is about the source topic of id ``topic_id``, copied into the
        destination topic of id ``destination_id`` (None: whichever): a commit into a
        destination topic since lost (:mod:`.destination_loss`) says nothing of the new one."""
        return all(mine is None or theirs is None or mine == theirs
                   for mine, theirs in ((self.topic_id, topic_id), (self.destination_id, destination_id)))


def encode_offsets(ends: Mapping[TopicPartition, int], now_ms: int, topic_ids: Mapping[str, str] | None = None,
                   destination_ids: Mapping[str, str] | None = None) -> bytearray:
    """One uncompressed v2 batch with a record per source partition, each with its topic's id
    in ``topic_ids`` and its destination topic's in ``destination_ids`` (by source topic) where
    it has them."""
    topic_ids, destination_ids = topic_ids or {}, destination_ids or {}

    def value(tp: TopicPartition, offset: int) -> bytes:
        fields: dict = {"offset": offset}
        if (topic_id := topic_ids.get(tp.topic)) is not None:
            fields["topic_id"] = topic_id
        if (destination_id := destination_ids.get(tp.topic)) is not None:
            fields["destination_id"] = destination_id
        return json.dumps(fields).encode()

    records = [Record(key=json.dumps({"topic": tp.topic, "partition": tp.partition}, sort_keys=True).encode(),
                      value=value(tp, offset), timestamp=now_ms)
               for tp, offset in sorted(ends.items())]
    return bytearray(kcodecs.build_batch(records))


def decode_offsets(record: Record) -> tuple[TopicPartition, Commit | None]:
    """The source partition a record is about and its commit (None for a tombstone)."""
    try:
        key = json.loads(bytes(record.key or b""))
        tp = TopicPartition(str(key["topic"]), int(key["partition"]))
        if record.value is None:
            return tp, None
        value = json.loads(bytes(record.value))
        topic_id, destination_id = value.get("topic_id"), value.get("destination_id")
        return tp, Commit(int(value["offset"]), None if topic_id is None else str(topic_id),
                          None if destination_id is None else str(destination_id))
    except (ValueError, KeyError, TypeError, AttributeError) as exc:
        raise OffsetsTopicError(f"record at offset {record.offset} of the offsets topic is not kmirror's: "
                                f"key {record.key!r}, value {record.value!r}") from exc


class CommittedOffsets:
    """One process's view of an offsets topic, brought up to date by :meth:`refresh`."""

    def __init__(self, client: KafkaClient, topic: str, *, max_wait_s: float):
        self._tail = CommittedTail(client, TopicPartition(topic, 0), max_wait_s=max_wait_s)
        self._offsets: dict[TopicPartition, Commit] = {}

    @property
    def partition(self) -> TopicPartition:
        return self._tail.tp

    def refresh(self) -> dict[TopicPartition, int]:
        """Every source partition's committed offset, read to the end of the topic as it is now
        (waiting while open transactions hide part of it, see :mod:`.topic_tail`)."""
        self._tail.update_latest(self._offsets, decode_offsets)
        return {tp: commit.offset for tp, commit in self._offsets.items()}

    def latest(self, wanted: Iterable[TopicPartition] | Mapping[TopicPartition, tuple[str | None, str | None]]
               ) -> dict[TopicPartition, int]:
        """The committed offsets of ``wanted`` (partitions, or partition -> the ids of the topic it
        is copied from and of the destination topic it is copied into), those committed at all
        and of those topics, read from the end of the topic backwards
        (:func:`~.topic_tail.latest_by_key`): a copier that commits every partition it follows at
        every commit finds them in its last transaction."""
        ids = wanted if isinstance(wanted, Mapping) else dict.fromkeys(wanted, (None, None))
        found = self._latest(ids)
        offsets = {source: commit.offset for source, (commit, _) in found.items() if commit.of(*ids[source])}
        self._offsets.update({source: found[source][0] for source in offsets})
        return offsets

    def latest_commits(self, wanted: Iterable[TopicPartition]) -> dict[TopicPartition, tuple[Commit, int]]:
        """The latest commit of each of ``wanted``, whichever topic it was of, and the time it
        was committed (ms since the epoch)."""
        return {source: (commit, record.timestamp) for source, (commit, record) in self._latest(wanted).items()}

    def _latest(self, wanted: Iterable[TopicPartition]) -> dict[TopicPartition, tuple[Commit, Record]]:
        return latest_by_key(self._tail._client, self._tail.tp, lambda record: [decode_offsets(record)], wanted,
                             max_wait_s=self._tail._max_wait_s)

    def record(self, ends: Mapping[TopicPartition, int], topic_ids: Mapping[str, str] | None = None,
               destination_ids: Mapping[str, str] | None = None) -> None:
        """What this process just committed (the next :meth:`refresh` reads it back too)."""
        topic_ids, destination_ids = topic_ids or {}, destination_ids or {}
        self._offsets.update({tp: Commit(offset, topic_ids.get(tp.topic), destination_ids.get(tp.topic))
                              for tp, offset in ends.items()})
