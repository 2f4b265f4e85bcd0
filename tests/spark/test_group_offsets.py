"""Consumer groups fail over exactly: a group consumes part of a topic at the source and commits,
the Spark mirror copies and translates, and the same group at the destination reads exactly the
records it had not consumed: no duplicate, no gap, also where small source batches were
coalesced into bigger ones (issue 40). librdkafka consumes on both sides; a group
with members at the destination is left alone. On the embedded broker and on real Kafka 4.x
(both clusters), whose group coordinator is Kafka's own."""

from __future__ import annotations

import threading

import pytest
from confluent_kafka import Consumer
from librdkafka_reader import read_to_end
from real_kafka import pairs

import kcodecs
from kcodecs import Record
from mirror.config import load_config
from mirror.kafka import KafkaClient, NewTopic, TopicPartition

pytestmark = pytest.mark.slow

PARTITIONS = 2


def _fill(client: KafkaClient) -> dict[int, list[bytes]]:
    client.create_topics([NewTopic("orders", PARTITIONS)])
    produced: dict[int, list[bytes]] = {p: [] for p in range(PARTITIONS)}
    for p in range(PARTITIONS):
        for b in range(20):
            records = [Record(key=None, value=b"p%d-%03d-%d" % (p, b, i)) for i in range(10)]
            client.produce([(TopicPartition("orders", p), kcodecs.build_batch(records, compression="zstd"))])
            produced[p] += [r.value for r in records]
    return produced


def _consumer(bootstrap: str, group: str) -> Consumer:
    return Consumer({"bootstrap.servers": bootstrap, "group.id": group, "auto.offset.reset": "earliest",
                     "enable.auto.commit": False, "isolation.level": "read_committed",
                     "enable.partition.eof": True})


def _consume_and_commit(bootstrap: str, group: str, count: int) -> dict[int, list[bytes]]:
    """``count`` records through the group, then a synchronous commit of exactly those."""
    consumer = _consumer(bootstrap, group)
    consumer.subscribe(["orders"])
    seen: dict[int, list[bytes]] = {p: [] for p in range(PARTITIONS)}
    try:
        while sum(map(len, seen.values())) < count:
            message = consumer.poll(10)
            assert message is not None, "the group got no records within 10 s"
            if not message.error():
                seen[message.partition()].append(message.value())
        consumer.commit(asynchronous=False)
    finally:
        consumer.close()
    return seen


def _resume(bootstrap: str, group: str) -> dict[int, list[bytes]]:
    """Everything the group reads from its committed offsets to the end."""
    consumer = _consumer(bootstrap, group)
    consumer.subscribe(["orders"])
    try:
        return read_to_end(consumer, "orders", PARTITIONS)
    finally:
        consumer.close()


@pytest.mark.parametrize("clusters", pairs("embedded", "kafka"), indirect=True)
def test_a_group_resumes_at_the_destination_exactly_where_it_stopped(tmp_path, clusters):
    from mirror.spark.job import run_mirror

    src, dst = clusters.source, clusters.destination
    with KafkaClient(src.bootstrap) as source, KafkaClient(dst.bootstrap) as destination:
        produced = _fill(source)
        destination.create_topics([NewTopic("orders", PARTITIONS)])
    consumed = _consume_and_commit(src.bootstrap, "billing", 137)
    _consume_and_commit(src.bootstrap, "busy", 10)
    # "busy" has a member at the destination while the mirror runs: its offsets are its own.
    busy = _consumer(dst.bootstrap, "busy")
    busy.subscribe(["orders"])
    while not busy.assignment():
        busy.poll(0.2)
    done = threading.Event()

    def keep_polling() -> None:  # heartbeats: the member stays in the group
        while not done.is_set():
            busy.poll(0.2)

    poller = threading.Thread(target=keep_polling)
    poller.start()
    config = load_config(None, {"source.bootstrap": src.bootstrap, "destination.bootstrap": dst.bootstrap,
                                "topics": "orders", "once": True, "checkpoint": str(tmp_path / "ck"),
                                "groups": "billing|busy|absent", "max_records_per_trigger": 150})
    try:
        totals = run_mirror(config)
    finally:
        done.set()
        poller.join(30)
        busy.close()
    resumed = _resume(dst.bootstrap, "billing")
    # The source's batches of ten small records were coalesced: translation must stay exact across them.
    assert totals.counters.by_class["coalesced"].records > 0
    assert totals.groups is not None and totals.groups.synced == ["billing"]
    assert "busy" in totals.groups.skipped
    for p in range(PARTITIONS):
        # Exactly what the group had not consumed: no duplicate, no gap, in order.
        assert resumed[p] == produced[p][len(consumed[p]):]
