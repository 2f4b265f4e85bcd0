"""Reading a topic back with librdkafka (confluent-kafka), the independent reader of Kafka
transactions that the exactly-once tests trust: every partition from offset 0 to its end."""

from __future__ import annotations

import time
from typing import Any, Callable

from confluent_kafka import Consumer, KafkaError, Message
from confluent_kafka import TopicPartition as CTP


def read_values(bootstrap: str, topic: str, partitions: int, *, isolation: str = "read_committed",
                take: Callable[[Message], Any] = Message.value, **conf) -> dict[int, list]:
    """Each partition's values in offset order, as a consumer with ``isolation.level`` sees them
    (or what ``take`` makes of each message: ``lambda m: (m.offset(), m.key(), m.value())``);
    ``conf`` adds librdkafka properties (``security.protocol`` and the like)."""
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "unused", "enable.auto.commit": False,
                         "isolation.level": isolation, "enable.partition.eof": True, **conf})
    consumer.assign([CTP(topic, p, 0) for p in range(partitions)])
    try:
        return read_to_end(consumer, topic, partitions, take)
    finally:
        consumer.close()


def read_to_end(consumer: Consumer, topic: str, partitions: int,
                take: Callable[[Message], Any] = Message.value) -> dict[int, list]:
    """What ``consumer`` (assigned or subscribed, with ``enable.partition.eof``) reads of each
    partition until it reports the end of every one: ``take(message)`` of each, its value by default."""
    seen: dict[int, list] = {p: [] for p in range(partitions)}
    at_end: set[int] = set()
    deadline = time.monotonic() + 60
    while len(at_end) < partitions:
        assert time.monotonic() < deadline, f"{topic}: {sorted(at_end)} of {partitions} partitions read to the end in 60 s"
        for message in consumer.consume(10_000, timeout=0.2):
            if message.error():
                assert message.error().code() == KafkaError._PARTITION_EOF, message.error()
                at_end.add(message.partition())
            else:
                seen[message.partition()].append(take(message))
    return seen
