"""A deleted topic takes its consumer groups' committed offsets with it, on the embedded broker
as on real Kafka 4.x (``GroupCoordinator.onPartitionsDeleted``): a topic created again under the
name is read from the group's reset policy, not from a stale position. Checked with
librdkafka's admin client and consumer; on the embedded broker, again after a restart.
"""

from __future__ import annotations

import time
import uuid

import pytest
from confluent_kafka import Consumer, ConsumerGroupTopicPartitions, KafkaError, KafkaException
from confluent_kafka import TopicPartition as CTP
from confluent_kafka.admin import AdminClient, NewTopic

from mirror.broker import EmbeddedBroker

pytestmark = pytest.mark.interop

TIMEOUT_S = 30
OFFSET_INVALID = -1001  # librdkafka: no committed offset


@pytest.fixture(params=["embedded", pytest.param("kafka", marks=pytest.mark.kafka)])
def cluster(request, tmp_path):
    if request.param == "kafka":
        yield request.getfixturevalue("kafka_source")
        return
    with EmbeddedBroker(tmp_path / "data") as broker:
        yield broker


def _committed(bootstrap: str, group: str) -> dict[tuple[str, int], int]:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    (future,) = admin.list_consumer_group_offsets([ConsumerGroupTopicPartitions(group)]).values()
    return {(tp.topic, tp.partition): tp.offset for tp in future.result(TIMEOUT_S).topic_partitions}


def _create(admin: AdminClient, topics: dict[str, int]) -> None:
    for future in admin.create_topics([NewTopic(name, count, 1) for name, count in topics.items()]).values():
        future.result(TIMEOUT_S)


# A group coordinator still loading or just elected (a fresh Kafka broker's first group): the
# commit was not applied, and librdkafka's synchronous commit hands these back rather than retrying.
_COORDINATOR_NOT_READY = (KafkaError.NOT_COORDINATOR, KafkaError.COORDINATOR_NOT_AVAILABLE,
                          KafkaError.COORDINATOR_LOAD_IN_PROGRESS)


def _commit(consumer: Consumer, offsets: list[CTP]) -> None:
    deadline = time.monotonic() + TIMEOUT_S
    while True:
        try:
            consumer.commit(offsets=offsets, asynchronous=False)
            return
        except KafkaException as exc:
            if exc.args[0].code() not in _COORDINATOR_NOT_READY or time.monotonic() > deadline:
                raise
            time.sleep(0.5)


def test_deleting_a_topic_drops_every_groups_offsets_of_it(cluster, tmp_path):
    suffix = uuid.uuid4().hex[:8]
    gone, kept, group, other = f"gone-{suffix}", f"kept-{suffix}", f"g-{suffix}", f"other-{suffix}"
    admin = AdminClient({"bootstrap.servers": cluster.bootstrap})
    _create(admin, {gone: 2, kept: 1})
    for name, offsets in ((group, [CTP(gone, 0, 5), CTP(kept, 0, 3)]), (other, [CTP(gone, 1, 7)])):
        consumer = Consumer({"bootstrap.servers": cluster.bootstrap, "group.id": name, "enable.auto.commit": False})
        try:
            _commit(consumer, offsets)
        finally:
            consumer.close()
    assert _committed(cluster.bootstrap, group) == {(gone, 0): 5, (kept, 0): 3}

    for future in admin.delete_topics([gone]).values():
        future.result(TIMEOUT_S)
    deadline = time.monotonic() + TIMEOUT_S  # Kafka removes them as its brokers learn of the deletion
    while _committed(cluster.bootstrap, group) != {(kept, 0): 3} and time.monotonic() < deadline:
        time.sleep(0.2)
    assert _committed(cluster.bootstrap, group) == {(kept, 0): 3}
    assert _committed(cluster.bootstrap, other) == {}

    # The name created again: the group has no position in it.
    deadline = time.monotonic() + TIMEOUT_S
    while True:  # Kafka refuses the name until the deletion is complete
        try:
            _create(admin, {gone: 2})
            break
        except Exception:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.5)
    consumer = Consumer({"bootstrap.servers": cluster.bootstrap, "group.id": group, "enable.auto.commit": False})
    try:
        assert [tp.offset for tp in consumer.committed([CTP(gone, 0), CTP(gone, 1)], timeout=TIMEOUT_S)] == \
            [OFFSET_INVALID, OFFSET_INVALID]
    finally:
        consumer.close()

    if isinstance(cluster, EmbeddedBroker):  # and after a restart (Kafka: a tombstone in __consumer_offsets)
        cluster.stop()
        with EmbeddedBroker(tmp_path / "data") as again:
            assert _committed(again.bootstrap, group) == {(kept, 0): 3}
