"""Fetch v13 (KIP-516) as the embedded broker serves it: topics named by id, and an id no
topic has any more answered UNKNOWN_TOPIC_ID, never with the records of the topic made since
under the same name (issue 70).

Requests are encoded and answers decoded by kafka-python's schemas (its FetchRequest and
FetchResponse v13), not by kmirror's codec; records are written by librdkafka.
"""

from __future__ import annotations

import uuid

import pytest
from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient
from kafka.protocol.consumer import FetchRequest

from broker_helpers import create_topic
from mirror.broker import EmbeddedBroker
from mirror.kafka import KafkaClient, TopicPartition

pytestmark = pytest.mark.interop

UNKNOWN_TOPIC_ID, INCONSISTENT_TOPIC_ID = 100, 103


@pytest.fixture
def broker(tmp_path):
    with EmbeddedBroker(tmp_path / "data") as running:
        yield running


def _write(bootstrap: str, topic: str, values: list[bytes]) -> None:
    producer = Producer({"bootstrap.servers": bootstrap})
    for value in values:
        producer.produce(topic, value=value, partition=0)
    assert producer.flush(30) == 0


def _topic_id(bootstrap: str, topic: str) -> uuid.UUID:
    with KafkaClient(bootstrap) as client:
        return client.listings()[topic].topic_id


def _delete(bootstrap: str, topic: str) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.delete_topics([topic])[topic].result(30)


def _fetch(bootstrap: str, topic_id: uuid.UUID, *, session_id: int = 0, epoch: int = -1, named: bool = True):
    """kafka-python's Fetch v13 of partition 0 of ``topic_id`` from offset 0."""
    partitions = [FetchRequest.FetchTopic.FetchPartition(partition=0, fetch_offset=0, log_start_offset=-1,
                                                         partition_max_bytes=1 << 20)] if named else []
    request = FetchRequest(replica_id=-1, max_wait_ms=0, min_bytes=1, max_bytes=1 << 20, isolation_level=0,
                           session_id=session_id, session_epoch=epoch, rack_id="", forgotten_topics_data=[],
                           topics=[FetchRequest.FetchTopic(topic_id=topic_id, partitions=partitions)] if named else [])
    with KafkaClient(bootstrap) as client:
        conn = client.connect(next(iter(client.leaders([TopicPartition("t", 0)]))))
        try:
            return conn.conn.call(request, 13)
        finally:
            conn.close()


def _answer(response) -> list[tuple[uuid.UUID, int, int, bytes]]:
    return [(topic.topic_id, part.partition_index, part.error_code, bytes(part.records or b""))
            for topic in response.responses for part in topic.partitions]


def test_a_topic_is_fetched_by_its_id_and_its_old_id_is_unknown_once_it_is_made_again(broker):
    create_topic(broker.bootstrap, "t")
    _write(broker.bootstrap, "t", [b"old-1", b"old-2"])
    old = _topic_id(broker.bootstrap, "t")
    ((topic_id, partition, error, records),) = _answer(_fetch(broker.bootstrap, old))
    assert (topic_id, partition, error) == (old, 0, 0) and b"old-2" in records
    _delete(broker.bootstrap, "t")
    create_topic(broker.bootstrap, "t")
    _write(broker.bootstrap, "t", [b"new-1"])
    new = _topic_id(broker.bootstrap, "t")
    assert new != old
    assert _answer(_fetch(broker.bootstrap, old)) == [(old, 0, UNKNOWN_TOPIC_ID, b"")]
    ((_, _, error, records),) = _answer(_fetch(broker.bootstrap, new))
    assert error == 0 and b"new-1" in records and b"old" not in records


def test_a_fetch_session_by_id_does_not_carry_on_into_the_topic_made_again(broker):
    """Kafka's FetchSession keys partitions by TopicIdPartition: the session's next request,
    naming nothing, gets INCONSISTENT_TOPIC_ID for the old topic's partition (Kafka 4.4 answers
    so: tests/realkafka/test_real_fetch_by_topic_id.py), not the new records."""
    create_topic(broker.bootstrap, "t")
    _write(broker.bootstrap, "t", [b"old-1"])
    old = _topic_id(broker.bootstrap, "t")
    opened = _fetch(broker.bootstrap, old, epoch=0)
    assert opened.session_id > 0 and _answer(opened)[0][2] == 0
    _delete(broker.bootstrap, "t")
    create_topic(broker.bootstrap, "t")
    _write(broker.bootstrap, "t", [b"new-1"])
    later = _fetch(broker.bootstrap, old, session_id=opened.session_id, epoch=1, named=False)
    assert later.error_code == 0 and _answer(later) == [(old, 0, INCONSISTENT_TOPIC_ID, b"")]
