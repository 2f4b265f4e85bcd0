"""Topics and partitions of the embedded broker, the append path that ties them together, and
the admin changes to them: more partitions (CreatePartitions, KIP-195), config changes
(AlterConfigs, IncrementalAlterConfigs, KIP-339), deletion (DeleteTopics) and DeleteRecords.

Topic metadata lives in ``<data_dir>/.topics/<name>.json`` (partition count and explicit
configs), written atomically before a change takes effect; partition data in
``<data_dir>/<topic>-<partition>/`` in Kafka's layout (see :mod:`mirror.broker.log`).
"""

from __future__ import annotations

import json
import logging
import os
import re
import shutil
import uuid
from pathlib import Path
from typing import Callable, Iterable, Literal, Mapping, NamedTuple

from kcodecs import V2Batch

from .errors import ApiError, kerr
from .log import LogConfig, OffsetOutOfRangeError, PartitionLog
from .log.files import DELETE_DIR_SUFFIX, fsync_dir, partition_dir
from .producer_state import BatchMetadata, ProducerStateTable
from ..protocol.configs import ConfigChange
from .topic_config import TopicConfig
from .validator import ValidationResult, assign_offsets, check_timestamps, control_batch, inspect_produced, last_sequence

__all__ = ["TopicStore", "Topic", "Partition", "AppendOutcome", "Verifier"]

log = logging.getLogger(__name__)

_TOPIC_NAME = re.compile(r"^[a-zA-Z0-9._-]{1,249}$")
HIGH_WATERMARK = -1
"""DeleteRecords' offset for "everything written so far" (Kafka's ``DeleteRecordsRequest.HIGH_WATERMARK``)."""


class AppendOutcome(NamedTuple):
    """What an append answers the producer; a NamedTuple, cheap to build once per batch."""

    base_offset: int
    log_append_time: int
    duplicate: bool


Verifier = Callable[[V2Batch, bool], None]
"""Checks a transactional batch before it is appended; raises :class:`ApiError`. Its second
argument says whether the producer's transaction is already open in the partition at the
batch's epoch: if not, the transaction coordinator must confirm the partition (KIP-890 part 1);
if so, Kafka skips that (``hasOngoingTransaction``). The Produce handler builds one per
partition and request."""


class Partition:
    """One partition: its log, its producer state, and the append paths that keep them in step
    (Kafka's ``UnifiedLog``)."""

    def __init__(self, topic: "Topic", index: int, log_: PartitionLog):
        self.topic = topic
        self.index = index
        self.log = log_
        self.producers = ProducerStateTable()
        aborted = [entry for batch in log_.batch_headers() if (entry := self.producers.replay(batch)) is not None]
        log_.rebuild_txn_indexes(aborted)

    @property
    def last_stable_offset(self) -> int:
        """Below it every transaction is decided: the first offset of the oldest open one (not
        below the log start, should retention have removed its start), else the log end, which
        is the high watermark on a single replica (``UnifiedLog.lastStableOffset``)."""
        first_unstable = self.producers.first_unstable_offset
        if first_unstable is None:
            return self.log.log_end_offset
        return max(first_unstable, self.log.log_start_offset)

    def append(self, data: bytes | memoryview, now_ms: int, *, verify: Verifier | None = None) -> AppendOutcome:
        """Validate, deduplicate, assign offsets and append one produced batch; all or nothing.

        A transactional batch goes to ``verify`` first (the coordinator must have this
        partition in the producer's ongoing transaction, unless the partition already holds
        that transaction's first batch); without one it is not checked.
        """
        config = self.topic.config
        produced = inspect_produced(data, config)
        header = produced.header
        producer_id, epoch, transactional = header.producer_id, header.producer_epoch, header.is_transactional
        if transactional and verify is not None:
            verify(produced.batch, self.producers.in_transaction(producer_id, epoch))
        check_timestamps(produced, config, now_ms)  # before the retry check, as Kafka's LogValidator runs first
        first_sequence, last_seq = header.base_sequence, last_sequence(header)
        duplicate = self.producers.check(producer_id, epoch, first_sequence, last_seq, transactional=transactional)
        if duplicate is not None:
            return AppendOutcome(duplicate.first_offset, duplicate.log_append_time, duplicate=True)
        result = assign_offsets(produced, next_offset=self.log.log_end_offset, now_ms=now_ms, config=config)
        self._write(result, now_ms)
        self.producers.record(producer_id, epoch, BatchMetadata(
            first_sequence, last_seq, result.first_offset, result.last_offset, result.log_append_time,
        ), now_ms=now_ms, transactional=transactional)
        return AppendOutcome(result.first_offset, result.log_append_time, duplicate=False)

    def write_marker(self, producer_id: int, producer_epoch: int, *, commit: bool, coordinator_epoch: int,
                     now_ms: int) -> int:
        """Append a COMMIT or ABORT marker for the producer's transaction; return its offset.

        What Kafka's ``WriteTxnMarkers`` does on the partition leader: the marker goes through
        offset assignment like any batch; an abort is indexed (``.txnindex``) before the
        transaction counts as closed, so a failed index write leaves it open (the LSO does not
        move) and the coordinator writes the marker again. Refused for a fenced producer epoch.
        """
        self.producers.check_marker(producer_id, producer_epoch, coordinator_epoch)
        result = control_batch(producer_id=producer_id, producer_epoch=producer_epoch, commit=commit,
                               coordinator_epoch=coordinator_epoch, next_offset=self.log.log_end_offset,
                               now_ms=now_ms, config=self.topic.config)
        self._write(result, now_ms)
        aborted = None if commit else self.producers.aborted_by(producer_id, result.first_offset)
        if aborted is not None:
            self.log.append_aborted_txn(aborted)
        self.producers.record_marker(producer_id, producer_epoch, coordinator_epoch, now_ms=now_ms)
        return result.first_offset

    def aborted_transactions(self, fetch_offset: int, upper_bound: int) -> list[tuple[int, int]]:
        """``(producer_id, first_offset)`` of the aborts overlapping ``[fetch_offset, upper_bound)``,
        what a read_committed Fetch response lists."""
        return [(entry.producer_id, entry.first_offset) for entry in self.log.collect_aborted_txns(fetch_offset, upper_bound)]

    def _write(self, result: ValidationResult, now_ms: int) -> None:
        self.log.append(
            result.data,
            first_offset=result.first_offset,
            last_offset=result.last_offset,
            max_timestamp=result.max_timestamp,
            offset_of_max_timestamp=result.offset_of_max_timestamp,
        )
        # Retention also runs on the append path (cheap: it looks at the oldest segment), so
        # a busy partition never waits for the broker's retention timer (TopicStore.enforce_retention).
        # It only ever deletes sealed segments: while there are none, not even the lock is taken.
        if self.log.has_sealed_segments:
            self.enforce_retention(now_ms)

    def enforce_retention(self, now_ms: int) -> int:
        """Delete segments past retention.ms/retention.bytes; return how many. A compact-only
        topic has no retention, as in Kafka (``UnifiedLog.deleteOldSegments``)."""
        if "delete" not in self.topic.config.cleanup_policy:
            return 0
        return self.log.delete_old_segments(now_ms)

    def delete_records(self, offset: int) -> int:
        """Move the log start offset up to ``offset`` (:data:`HIGH_WATERMARK`: the log end, which
        is the high watermark on a single replica); return the new log start, DeleteRecords'
        low watermark. Kafka's ``Partition.deleteRecordsOnLeader``, with its errors: a
        compact-only topic refuses (POLICY_VIOLATION), an offset past the high watermark or
        negative is OFFSET_OUT_OF_RANGE."""
        name = f"{self.topic.name}-{self.index}"
        if "delete" not in self.topic.config.cleanup_policy:
            raise ApiError(kerr.PolicyViolationError,
                           f"Records of partition {name} can not be deleted due to the configured policy")
        high_watermark = self.log.log_end_offset
        target = high_watermark if offset == HIGH_WATERMARK else offset
        if target < 0:
            raise ApiError(kerr.OffsetOutOfRangeError, f"The offset {target} for partition {name} is not valid")
        try:
            return self.log.delete_records(target)
        except OffsetOutOfRangeError as exc:
            raise ApiError(kerr.OffsetOutOfRangeError,
                           f"Cannot increment the log start offset to {target} of partition {name} since it is"
                           f" larger than the high watermark {high_watermark}") from exc


class Topic:
    def __init__(self, name: str, config: TopicConfig, topic_id: uuid.UUID):
        self.name = name
        self.config = config
        self.topic_id = topic_id
        """Its identity (KIP-516): a topic made again under the same name gets another one, as in
        Kafka, so that a client tells the two apart (Metadata v10+)."""
        self.partitions: list[Partition] = []


class TopicStore:
    """All topics of one broker, loaded (and recovered) from its data directory."""

    def __init__(self, data_dir: Path, *, flush: Literal["always", "os"] = "os"):
        self.data_dir = data_dir
        self.flush = flush
        self.topics: dict[str, Topic] = {}
        self._ids: dict[uuid.UUID, Topic] = {}
        """The same topics by id: a Fetch v13 names each of its topics by id (KIP-516)."""
        self._former: dict[uuid.UUID, str] = {}
        """The names of topics deleted since this broker started, by id (:meth:`former_name`)."""
        self.on_delete: list[Callable[[str], None]] = []
        """Called with a topic's name once it is deleted (the log cleaner drops its checkpoint entries)."""
        self._meta_dir = data_dir / ".topics"
        self._meta_dir.mkdir(parents=True, exist_ok=True)

    def load(self) -> None:
        for trash in sorted(self.data_dir.glob(f"*{DELETE_DIR_SUFFIX}")):
            log.info("removing %s, a deleted partition a crash left", trash)
            shutil.rmtree(trash)
        for meta_file in sorted(self._meta_dir.glob("*.json")):
            meta = json.loads(meta_file.read_text())
            config = TopicConfig.from_kafka(meta["configs"])
            if "id" in meta:
                topic_id = uuid.UUID(meta["id"])
            else:  # written before topics had ids: given one now, once, as Kafka does on its upgrade to them
                topic_id = uuid.uuid4()
                self._write_meta(meta["name"], meta["partitions"], config, topic_id)
            self._open(meta["name"], meta["partitions"], config, topic_id)
        log.info("loaded %d topics from %s", len(self.topics), self.data_dir)

    def by_id(self, topic_id: uuid.UUID) -> Topic | None:
        return self._ids.get(topic_id)

    def former_name(self, topic_id: uuid.UUID) -> str | None:
        """The name of the deleted topic that had ``topic_id``: a fetch session that began on it
        reads its partitions under that name, as Kafka's does, and finds another topic there."""
        return self._former.get(topic_id)

    def topic(self, name: str) -> Topic:
        found = self.topics.get(name)
        if found is None:
            raise ApiError(kerr.UnknownTopicOrPartitionError, f"The topic '{name}' does not exist.")
        return found

    def has_partition(self, topic: str, index: int) -> bool:
        found = self.topics.get(topic)
        return found is not None and 0 <= index < len(found.partitions)

    def partition(self, topic: str, index: int) -> Partition:
        if not self.has_partition(topic, index):
            raise ApiError(kerr.UnknownTopicOrPartitionError, f"{topic}-{index} does not exist on this broker")
        return self.topics[topic].partitions[index]

    def create(self, name: str, partitions: int, configs: dict[str, str | None], *, validate_only: bool = False) -> Topic | None:
        """Create a topic, or raise the Kafka error CreateTopics reports for it."""
        check_topic_name(name)
        if name in self.topics:
            raise ApiError(kerr.TopicAlreadyExistsError, f"topic {name!r} already exists")
        if partitions < 1:
            raise ApiError(kerr.InvalidPartitionsError, f"number of partitions must be at least 1, got {partitions}")
        config = TopicConfig.from_kafka(configs)
        if validate_only:
            return None
        topic_id = uuid.uuid4()
        self._write_meta(name, partitions, config, topic_id)
        topic = self._open(name, partitions, config, topic_id)
        log.info("created topic %s with %d partitions %s", name, partitions, config.explicit() or "")
        return topic

    def add_partitions(self, name: str, count: int, *, assignments: int | None = None,
                       validate_only: bool = False) -> None:
        """Grow topic ``name`` to ``count`` partitions (CreatePartitions, KIP-195), or raise what
        Kafka's controller does (``ReplicationControlManager.createPartitions``): fewer or as
        many partitions are INVALID_PARTITIONS, and ``assignments`` (how many replica lists
        were given, if any) must number the new partitions (INVALID_REPLICA_ASSIGNMENT).

        The new partitions are written to the topic's metadata before they open, so a crash
        in between opens them at the next start; Metadata lists them from now on."""
        topic = self.topic(name)
        current = len(topic.partitions)
        if count == current:
            raise ApiError(kerr.InvalidPartitionsError, f"Topic already has {current} partition(s).")
        if count < current:
            raise ApiError(kerr.InvalidPartitionsError,
                           f"The topic {name} currently has {current} partition(s); {count} would not be an increase.")
        if assignments is not None and assignments != count - current:
            raise ApiError(kerr.InvalidReplicationAssignmentError,
                           f"Attempted to add {count - current} additional partition(s), but only {assignments}"
                           f" assignment(s) were specified.")
        if validate_only:
            return
        self._write_meta(name, count, topic.config, topic.topic_id)
        self._open_partitions(topic, range(current, count))
        log.info("topic %s: partitions %d -> %d", name, current, count)

    def alter_configs(self, name: str, configs: Mapping[str, str | None], *, now_ms: int,
                      validate_only: bool = False) -> None:
        """Replace the dynamic configs of topic ``name`` with ``configs``: those not named go
        back to their defaults (AlterConfigs, Kafka's ``legacyAlterConfigs``)."""
        topic = self.topic(name)
        self._reconfigure(topic, TopicConfig.from_kafka(configs), now_ms=now_ms, validate_only=validate_only)

    def incremental_alter_configs(self, name: str, changes: Iterable[ConfigChange], *, now_ms: int,
                                  validate_only: bool = False) -> None:
        """Change the dynamic configs of topic ``name`` one by one (IncrementalAlterConfigs,
        KIP-339; see :meth:`TopicConfig.incremental`)."""
        topic = self.topic(name)
        self._reconfigure(topic, topic.config.incremental(changes), now_ms=now_ms, validate_only=validate_only)

    def _reconfigure(self, topic: Topic, config: TopicConfig, *, now_ms: int, validate_only: bool) -> None:
        """Persist ``config`` and apply it at once: appends, the cleaner and the roll limits read
        it from now on, and retention runs with it now (a smaller retention.ms or
        retention.bytes deletes before the answer, not at the next retention check)."""
        if validate_only:
            return
        self._write_meta(topic.name, len(topic.partitions), config, topic.topic_id)
        before, topic.config = topic.config.as_kafka(), config
        log_config = self._log_config(config)
        for partition in topic.partitions:
            partition.log.reconfigure(log_config)
            partition.enforce_retention(now_ms)
        for key, value in config.as_kafka().items():
            if value != before[key]:
                log.info("topic %s: %s=%s (was %s)", topic.name, key, value, before[key])

    def delete(self, name: str) -> None:
        """Delete topic ``name``: its partition directories, then its metadata (DeleteTopics).

        It leaves :attr:`topics` first, so no request finds it again; a topic created under
        the same name afterwards starts empty. A crash between the directories and the
        metadata leaves the topic with empty partitions at the next start."""
        topic = self.topic(name)
        del self.topics[name]
        del self._ids[topic.topic_id]
        self._former[topic.topic_id] = name
        for partition in topic.partitions:
            partition.log.delete()
        (self._meta_dir / f"{name}.json").unlink()
        fsync_dir(self._meta_dir)
        for listener in self.on_delete:
            listener(name)
        log.info("deleted topic %s (%d partitions)", name, len(topic.partitions))

    def _write_meta(self, name: str, partitions: int, config: TopicConfig, topic_id: uuid.UUID) -> None:
        meta = {"name": name, "id": str(topic_id), "partitions": partitions, "configs": config.explicit()}
        tmp = self._meta_dir / f"{name}.json.tmp"
        tmp.write_text(json.dumps(meta, indent=2))
        os.replace(tmp, self._meta_dir / f"{name}.json")

    def _open(self, name: str, partitions: int, config: TopicConfig, topic_id: uuid.UUID) -> Topic:
        topic = Topic(name, config, topic_id)
        self._open_partitions(topic, range(partitions))
        self.topics[name] = self._ids[topic_id] = topic
        return topic

    def _open_partitions(self, topic: Topic, indexes: range) -> None:
        log_config = self._log_config(topic.config)
        for index in indexes:
            plog = PartitionLog.open(partition_dir(self.data_dir, topic.name, index), log_config)
            topic.partitions.append(Partition(topic, index, plog))

    def _log_config(self, config: TopicConfig) -> LogConfig:
        """What the partition logs take from the topic's configs."""
        return LogConfig(
            segment_bytes=config.segment_bytes,
            segment_ms=config.max_segment_ms,
            retention_ms=config.retention_ms,
            retention_bytes=config.retention_bytes,
            flush=self.flush,
        )

    def enforce_retention(self, now_ms: int) -> int:
        """Apply retention to every partition, busy or idle (Kafka's ``log.retention.check.interval.ms``
        task); return how many segments went."""
        return sum(partition.enforce_retention(now_ms)
                   for topic in list(self.topics.values()) for partition in topic.partitions)

    def expire_producers(self, now_ms: int, expiration_ms: int) -> int:
        """Forget, in every partition, the producers idle for ``expiration_ms`` (Kafka's
        ``PeriodicProducerExpirationCheck``); return how many entries went."""
        return sum(len(partition.producers.expire(now_ms, expiration_ms))
                   for topic in list(self.topics.values()) for partition in topic.partitions)

    def close(self) -> None:
        for topic in self.topics.values():
            for partition in topic.partitions:
                partition.log.close()


def check_topic_name(name: str) -> None:
    """Kafka's ``Topic.validate``: legal characters, at most 249 of them, not '.' or '..'."""
    if name in (".", "..") or not _TOPIC_NAME.match(name or ""):
        raise ApiError(kerr.InvalidTopicError, f"illegal topic name {name!r}: use 1-249 of [a-zA-Z0-9._-], not '.' or '..'")
