"""Reading a topic back with librdkafka (confluent-kafka), the independent reader of Kafka
transactions that the exactly-once tests trust: every partition from offset 0 to its end."""

from __future__ import annotations

import time

from confluent_kafka import Consumer, KafkaError
from confluent_kafka import TopicPartition as CTP


def read_values(bootstrap: str, topic: str, partitions: int, *,
                isolation: str = "read_committed", **conf) -> dict[int, list[bytes]]:
    """Each partition's values in offset order, as a consumer with ``isolation.level`` sees them;
    ``conf`` adds librdkafka properties (``security.protocol`` and the like)."""
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "unused", "enable.auto.commit": False,
                         "isolation.level": isolation, "enable.partition.eof": True, **conf})
    consumer.assign([CTP(topic, p, 0) for p in range(partitions)])
    try:
        return read_to_end(consumer, topic, partitions)
    finally:
        consumer.close()


def read_to_end(consumer: Consumer, topic: str, partitions: int) -> dict[int, list[bytes]]:
    """What ``consumer`` (assigned or subscribed, with ``enable.partition.eof``) reads of each
    partition until it reports the end of every one."""
    seen: dict[int, list[bytes]] = {p: [] for p in range(partitions)}
    at_end: set[int] = set()
    deadline = time.monotonic() + 60
    while len(at_end) < partitions:
        assert time.monotonic() < deadline, f"{topic}: {sorted(at_end)} of {partitions} partitions read to the end in 60 s"
        for message in consumer.consume(10_000, timeout=0.2):
            if message.error():
                assert message.error().code() == KafkaError._PARTITION_EOF, message.error()
                at_end.add(message.partition())
            else:
                seen[message.partition()].append(message.value())
    return seen
