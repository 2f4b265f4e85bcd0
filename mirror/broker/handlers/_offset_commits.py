"""What OffsetCommit and TxnOffsetCommit share: the partitions Kafka's ``KafkaApis`` passes on
to the group coordinator, and the per-topic answer."""

from __future__ import annotations

from typing import Callable

from ..errors import kerr
from ..groups import OffsetCommit

TopicPartition = tuple[str, int]


def known_partitions(topics, state) -> tuple[dict[TopicPartition, OffsetCommit], dict[TopicPartition, int]]:
    """The commits for partitions that exist, and UNKNOWN_TOPIC_OR_PARTITION for the others."""
    commits, unknown = {}, {}
    for topic in topics:
        for p in topic.partitions:
            tp = (topic.name, p.partition_index)
            if not state.topics.has_partition(*tp):
                unknown[tp] = kerr.UnknownTopicOrPartitionError.errno
            else:
                commits[tp] = (p.committed_offset, p.committed_leader_epoch, p.committed_metadata)
    return commits, unknown


def all_partitions(topics, code: int) -> dict[TopicPartition, int]:
    """One error for every partition of the request (a refusal of the whole commit)."""
    return {(topic.name, p.partition_index): code for topic in topics for p in topic.partitions}


def by_topic(codes: dict[TopicPartition, int], topic_class, partition_class: Callable) -> list:
    topics: dict[str, list] = {}
    for (name, index), code in codes.items():
        topics.setdefault(name, []).append(partition_class(partition_index=index, error_code=code))
    return [topic_class(name=name, partitions=partitions) for name, partitions in topics.items()]
