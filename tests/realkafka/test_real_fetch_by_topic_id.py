"""The fetcher names topics by id (Fetch v13, KIP-516), on real Kafka 4.4 and on the embedded
broker (issue 70): a topic deleted and made again under its name, fetched on from the old
topic's offsets, is settled as :class:`TopicIdGoneError` instead of answering with the new
topic's records, whether its partition is fetched in full or waits in the leader's fetch session.

Records are written by librdkafka and the topics made and deleted by its admin client; the
fetcher under test only reads.
"""

from __future__ import annotations

import time

import pytest
from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient
from kafka.protocol.consumer import FetchRequest

import kcodecs
from mirror.kafka import Fetcher, KafkaClient, TopicIdGoneError, TopicPartition, wait_readable
from topic_lifecycle import cluster, create_topic

pytestmark = [pytest.mark.interop, pytest.mark.timeout(300)]


def _write(bootstrap: str, name: str, values: list[bytes]) -> None:
    producer = Producer({"bootstrap.servers": bootstrap, "topic.metadata.propagation.max.ms": 60_000})
    for value in values:
        producer.produce(name, value=value, partition=0)
    assert producer.flush(60) == 0


def _values(records: memoryview) -> list[bytes]:
    return [bytes(r.value) for batch in kcodecs.iter_batches(records) for r in batch.records()]


def _next(fetcher: Fetcher, tp: TopicPartition, offset: int, timeout_s: float = 30):
    """Fetch ``tp`` from ``offset`` until an answer settles it."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        fetcher.send({tp: offset})
        for conn in wait_readable(fetcher.connections(), 1.0):
            settled = fetcher.on_readable(conn)
            if tp in settled:
                return settled[tp]
    raise AssertionError(f"no answer for {tp} in {timeout_s} s")


@pytest.mark.parametrize("at_end", [False, True], ids=["in-full", "in-its-session"])
@pytest.mark.parametrize("kind", ["kafka", "embedded"])
def test_a_topic_made_again_is_not_fetched_on_from_the_old_topics_offsets(kind, at_end, request, tmp_path):
    name = f"ids.{kind}.{int(at_end)}.{time.time_ns()}"
    tp = TopicPartition(name, 0)
    with cluster(kind, request, tmp_path) as bootstrap, KafkaClient(bootstrap) as client:
        admin = AdminClient({"bootstrap.servers": bootstrap})
        create_topic(admin, name, 1)
        _write(bootstrap, name, [b"old-%d" % i for i in range(5)])
        fetcher = Fetcher(client, max_bytes=1 << 20, max_wait_ms=100)
        try:
            first = _next(fetcher, tp, 0)
            assert _values(first.records) == [b"old-%d" % i for i in range(5)]
            leader = client.connect(next(iter(client.leaders([tp]))))
            assert leader.version_of(FetchRequest, 13) == 13, "the leader speaks Fetch v13"
            leader.close()
            offset = 3 if not at_end else 5  # in full: a backlog left; at its end: the session's long poll
            if at_end:
                assert _next(fetcher, tp, 5).records == b""
            admin.delete_topics([name])[name].result(30)
            create_topic(admin, name, 1)
            _write(bootstrap, name, [b"new-%d" % i for i in range(10)])
            deadline = time.monotonic() + 60
            while not isinstance(got := _next(fetcher, tp, offset), TopicIdGoneError):
                # Kafka's leader may hold the old topic a while after its deletion.
                assert b"new" not in bytes(got.records), "the new topic's records at the old topic's offsets"
                assert time.monotonic() < deadline, "the old topic's id still answered after 60 s"
                time.sleep(0.2)
            # A full fetch of an id no topic has: UNKNOWN_TOPIC_ID. A session that holds the
            # partition reads it under its name, and finds a log of another id there:
            # INCONSISTENT_TOPIC_ID (Kafka 4.4, 2026-12-03).
            assert (got.tp, got.code) == (tp, 103 if at_end else 100)
            assert str(got).startswith(f"{name}/0: the source has no topic of id ")
        finally:
            fetcher.close()
