"""The demo's consumer group: it reads part of a topic at the source and commits, and after the
mirror it resumes at the destination. Both sides with kafka-python, an independent client.

What it shows: the group's committed offsets were translated exactly, so at the destination it
reads precisely the records it had not consumed at the source, no duplicate and no gap.
"""

from __future__ import annotations

import time

from kafka import KafkaConsumer
from kafka import TopicPartition as KafkaTopicPartition

from .fill import DemoError

__all__ = ["DEMO_GROUP", "GROUP_TOPIC", "consume_part", "resume"]

DEMO_GROUP = "kmirror-demo.billing"
GROUP_TOPIC = "nokeys.kmirror"
"""A passed-through topic: its translation must be exact."""
_TIMEOUT_S = 60.0


def consume_part(bootstrap: str, share: float) -> dict[int, int]:
    """``share`` of the topic's records through the group, then a synchronous commit; returns
    how many records of each partition the group consumed (from the log start)."""
    consumer = _consumer(bootstrap)
    consumer.subscribe([GROUP_TOPIC])
    try:
        total = sum(consumer.end_offsets(_partitions(consumer)).values())
        consumed: dict[int, int] = {}
        deadline = time.monotonic() + _TIMEOUT_S
        while sum(consumed.values()) < share * total:
            if time.monotonic() > deadline:
                raise DemoError(f"the demo group read only {sum(consumed.values())} records in {_TIMEOUT_S:.0f} s")
            for tp, records in consumer.poll(timeout_ms=500, max_records=500).items():
                consumed[tp.partition] = consumed.get(tp.partition, 0) + len(records)
        consumer.commit()
    finally:
        consumer.close()
    return consumed


def resume(bootstrap: str, expected: int) -> dict[int, list[bytes]]:
    """What the group reads at ``bootstrap`` from its committed offsets: until ``expected``
    records came, then one more poll, so that a duplicate would show too."""
    consumer = _consumer(bootstrap)
    consumer.subscribe([GROUP_TOPIC])
    seen: dict[int, list[bytes]] = {}
    try:
        deadline = time.monotonic() + _TIMEOUT_S
        while sum(map(len, seen.values())) < expected and time.monotonic() < deadline:
            _take(consumer.poll(timeout_ms=500), seen)
        _take(consumer.poll(timeout_ms=1000), seen)
    finally:
        consumer.close()
    return seen


def _take(polled, seen: dict[int, list[bytes]]) -> None:
    for tp, records in polled.items():
        seen.setdefault(tp.partition, []).extend(r.value for r in records)


def _consumer(bootstrap: str) -> KafkaConsumer:
    return KafkaConsumer(bootstrap_servers=bootstrap, group_id=DEMO_GROUP, enable_auto_commit=False,
                         auto_offset_reset="earliest", isolation_level="read_committed",
                         client_id="kmirror-demo-group")


def _partitions(consumer: KafkaConsumer) -> list[KafkaTopicPartition]:
    return [KafkaTopicPartition(GROUP_TOPIC, p) for p in sorted(consumer.partitions_for_topic(GROUP_TOPIC) or ())]
