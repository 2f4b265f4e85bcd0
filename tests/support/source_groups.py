"""A source topic written and a consumer group that read part of it, with librdkafka
(confluent-kafka), for the failover tests of ``kmirror groups translate``.

Imported as ``source_groups`` (tests/support/ is on ``sys.path``: pyproject's ``pythonpath``).
"""

from __future__ import annotations

import threading
from contextlib import contextmanager
from typing import Iterator

from confluent_kafka import Consumer, Producer
from kafka.admin import KafkaAdminClient, NewTopic


def fill(bootstrap: str, topic: str, partitions: int, per_partition: int, label: str = "") -> dict[int, list[bytes]]:
    """``topic`` created with ``partitions`` and ``per_partition`` records written to each, in
    batches of ten, their values starting with ``label`` (default: the topic); returns each
    partition's values in order."""
    admin = KafkaAdminClient(bootstrap_servers=bootstrap, request_timeout_ms=10_000)
    try:
        admin.create_topics([NewTopic(topic, partitions, 1)])
    finally:
        admin.close()
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5, "batch.num.messages": 10,
                         "enable.idempotence": True})
    prefix = (label or topic).encode()
    written = {p: [b"%s-p%d-%05d" % (prefix, p, i) for i in range(per_partition)] for p in range(partitions)}
    for p, values in written.items():
        for value in values:
            producer.produce(topic, value, partition=p)
    assert producer.flush(30) == 0, "records left unsent after 30 s"
    return written


def group_consumer(bootstrap: str, group: str) -> Consumer:
    return Consumer({"bootstrap.servers": bootstrap, "group.id": group, "auto.offset.reset": "earliest",
                     "enable.auto.commit": False, "isolation.level": "read_committed", "enable.partition.eof": True})


def consume_and_commit(bootstrap: str, group: str, topic: str, partitions: int, count: int) -> dict[int, list[bytes]]:
    """``count`` records of ``topic`` through ``group``, then a synchronous commit of exactly
    those; returns what each partition gave."""
    consumer = group_consumer(bootstrap, group)
    consumer.subscribe([topic])
    seen: dict[int, list[bytes]] = {p: [] for p in range(partitions)}
    try:
        while sum(map(len, seen.values())) < count:
            message = consumer.poll(10)
            assert message is not None, f"group {group} got no record within 10 s"
            if not message.error():
                seen[message.partition()].append(message.value())
        consumer.commit(asynchronous=False)
    finally:
        consumer.close()
    return seen


@contextmanager
def active_member(bootstrap: str, group: str, topic: str) -> Iterator[None]:
    """A member of ``group`` subscribed to ``topic`` and assigned, kept in the group by a thread
    that polls (and so heartbeats) until the block ends: an active group that a failover
    must leave alone."""
    member = group_consumer(bootstrap, group)
    member.subscribe([topic])
    while not member.assignment():
        member.poll(0.2)
    done = threading.Event()

    def keep_polling() -> None:
        while not done.is_set():
            member.poll(0.2)

    poller = threading.Thread(target=keep_polling)
    poller.start()
    try:
        yield
    finally:
        done.set()
        poller.join(30)
        member.close()
