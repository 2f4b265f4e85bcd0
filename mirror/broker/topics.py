"""Topics and partitions of the embedded broker, and the append path that ties them together.

Topic metadata lives in ``<data_dir>/.topics/<name>.json`` (partition count and explicit
configs), written atomically; partition data in ``<data_dir>/<topic>-<partition>/`` in
Kafka's layout (see :mod:`mirror.broker.log`).
"""

from __future__ import annotations

import json
import logging
import os
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from .errors import ApiError, kerr
from .log import LogConfig, PartitionLog
from .producer_state import BatchMetadata, ProducerStateTable
from .topic_config import TopicConfig
from .validator import assign_offsets, inspect_produced, last_sequence

__all__ = ["TopicStore", "Topic", "Partition", "AppendOutcome"]

log = logging.getLogger(__name__)

_TOPIC_NAME = re.compile(r"^[a-zA-Z0-9._-]{1,249}$")


@dataclass(frozen=True)
class AppendOutcome:
    base_offset: int
    log_append_time: int
    duplicate: bool


class Partition:
    def __init__(self, topic: "Topic", index: int, log_: PartitionLog):
        self.topic = topic
        self.index = index
        self.log = log_
        self.producers = ProducerStateTable.rebuilt(log_.batch_headers())

    def append(self, data: bytes | memoryview, now_ms: int) -> AppendOutcome:
        """Validate, deduplicate, assign offsets and append one produced batch; all or nothing."""
        config = self.topic.config
        batch = inspect_produced(data, config)
        producer_id, epoch = batch.producer_id, batch.producer_epoch
        first_sequence, last_seq = batch.base_sequence, last_sequence(batch)
        duplicate = self.producers.check(producer_id, epoch, first_sequence, last_seq)
        if duplicate is not None:
            return AppendOutcome(duplicate.first_offset, duplicate.log_append_time, duplicate=True)
        result = assign_offsets(batch, next_offset=self.log.log_end_offset, now_ms=now_ms, config=config)
        self.log.append(
            result.data,
            first_offset=result.first_offset,
            last_offset=result.last_offset,
            max_timestamp=result.max_timestamp,
            offset_of_max_timestamp=result.offset_of_max_timestamp,
        )
        # Retention runs on the append path: cheap (it looks at the oldest segment only) and
        # it needs no background task. A partition that stops receiving data keeps its segments.
        self.log.delete_old_segments(now_ms)
        self.producers.record(producer_id, epoch, BatchMetadata(
            first_sequence, last_seq, result.first_offset, result.last_offset, result.log_append_time,
        ))
        return AppendOutcome(result.first_offset, result.log_append_time, duplicate=False)


class Topic:
    def __init__(self, name: str, config: TopicConfig):
        self.name = name
        self.config = config
        self.partitions: list[Partition] = []


class TopicStore:
    """All topics of one broker, loaded (and recovered) from its data directory."""

    def __init__(self, data_dir: Path, *, flush: Literal["always", "os"] = "os"):
        self.data_dir = data_dir
        self.flush = flush
        self.topics: dict[str, Topic] = {}
        self._meta_dir = data_dir / ".topics"
        self._meta_dir.mkdir(parents=True, exist_ok=True)

    def load(self) -> None:
        for meta_file in sorted(self._meta_dir.glob("*.json")):
            meta = json.loads(meta_file.read_text())
            self._open(meta["name"], meta["partitions"], TopicConfig.from_kafka(meta["configs"]))
        log.info("loaded %d topics from %s", len(self.topics), self.data_dir)

    def partition(self, topic: str, index: int) -> Partition:
        found = self.topics.get(topic)
        if found is None or not 0 <= index < len(found.partitions):
            raise ApiError(kerr.UnknownTopicOrPartitionError, f"{topic}-{index} does not exist on this broker")
        return found.partitions[index]

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
        meta = {"name": name, "partitions": partitions, "configs": config.explicit()}
        tmp = self._meta_dir / f"{name}.json.tmp"
        tmp.write_text(json.dumps(meta, indent=2))
        os.replace(tmp, self._meta_dir / f"{name}.json")
        topic = self._open(name, partitions, config)
        log.info("created topic %s with %d partitions %s", name, partitions, config.explicit() or "")
        return topic

    def _open(self, name: str, partitions: int, config: TopicConfig) -> Topic:
        topic = Topic(name, config)
        log_config = LogConfig(
            segment_bytes=config.segment_bytes,
            segment_ms=config.segment_ms,
            retention_ms=config.retention_ms,
            retention_bytes=config.retention_bytes,
            flush=self.flush,
        )
        for index in range(partitions):
            plog = PartitionLog.open(self.data_dir / f"{name}-{index}", log_config)
            topic.partitions.append(Partition(topic, index, plog))
        self.topics[name] = topic
        return topic

    def close(self) -> None:
        for topic in self.topics.values():
            for partition in topic.partitions:
                partition.log.close()


def check_topic_name(name: str) -> None:
    """Kafka's ``Topic.validate``: legal characters, at most 249 of them, not '.' or '..'."""
    if name in (".", "..") or not _TOPIC_NAME.match(name or ""):
        raise ApiError(kerr.InvalidTopicError, f"illegal topic name {name!r}: use 1-249 of [a-zA-Z0-9._-], not '.' or '..'")
