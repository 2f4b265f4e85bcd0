"""Topics made, deleted and made again, as an operator does it with librdkafka's admin client,
on real Kafka (a test's ``kafka_source`` and ``kafka_destination`` fixtures) or on embedded
brokers: the helpers the tests of issue 70 share.

Imported as ``topic_lifecycle`` (tests/support/ is on ``sys.path``).
"""

from __future__ import annotations

import contextlib
import time
import uuid

from confluent_kafka import KafkaException, Producer, TopicCollection
from confluent_kafka.admin import AdminClient, NewTopic


@contextlib.contextmanager
def cluster(kind: str, request, tmp_path):
    """One cluster's bootstrap: real Kafka's source (``kind`` "kafka") or an embedded broker."""
    if kind == "kafka":
        yield request.getfixturevalue("kafka_source").bootstrap
        return
    from mirror.broker import EmbeddedBroker

    with EmbeddedBroker(tmp_path / "embedded") as broker:
        yield broker.bootstrap


@contextlib.contextmanager
def clusters(kind: str, request, tmp_path):
    """A source's and a destination's bootstraps: real Kafka's pair, or two embedded brokers."""
    if kind == "kafka":
        yield request.getfixturevalue("kafka_source").bootstrap, request.getfixturevalue("kafka_destination").bootstrap
        return
    from mirror.broker import EmbeddedBroker

    with EmbeddedBroker(tmp_path / "src") as source, EmbeddedBroker(tmp_path / "dst") as destination:
        yield source.bootstrap, destination.bootstrap


def topic_id(admin: AdminClient, name: str) -> uuid.UUID:
    """The topic's id as librdkafka describes it (DescribeTopics)."""
    (future,) = admin.describe_topics(TopicCollection([name])).values()
    found = future.result(30).topic_id  # librdkafka's Uuid: its str is Kafka's base64
    high, low = found.get_most_significant_bits(), found.get_least_significant_bits()
    return uuid.UUID(int=((high % 2**64) << 64) | (low % 2**64))


def create_topic(admin: AdminClient, name: str, partitions: int) -> None:
    """Made, retried while Kafka still deletes the topic of that name (its deletion is asynchronous)."""
    deadline = time.monotonic() + 60
    while True:
        try:
            for future in admin.create_topics([NewTopic(name, partitions, 1)]).values():
                future.result(30)
            return
        except KafkaException as exc:
            if "already exists" not in str(exc) and "marked for deletion" not in str(exc) \
                    or time.monotonic() > deadline:
                raise
            time.sleep(0.5)


def delete_topic(admin: AdminClient, name: str) -> None:
    for future in admin.delete_topics([name]).values():
        future.result(30)


def produce_values(bootstrap: str, name: str, generation: str, per_partition: int,
                   partitions: int) -> dict[int, list[bytes]]:
    """``per_partition`` values into each partition, written by librdkafka's idempotent producer
    (lz4): ``generation/partition/i``."""
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5, "compression.type": "lz4",
                         "enable.idempotence": True})
    sent = {p: [f"{generation}/{p}/{i}".encode() for i in range(per_partition)] for p in range(partitions)}
    for p, values in sent.items():
        for value in values:
            producer.produce(name, value=value, partition=p)
            producer.poll(0)
    assert producer.flush(60) == 0
    return sent
