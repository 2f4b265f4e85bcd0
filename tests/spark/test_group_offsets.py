"""Consumer groups fail over exactly: a group consumes part of a topic at the source and commits,
the Spark mirror copies and translates, and the same group at the destination reads exactly the
records it had not consumed: no duplicate, no gap, also where small source batches were
coalesced into bigger ones (issue 40). librdkafka consumes on both sides; a group
with members at the destination is left alone. On the embedded broker and on real Kafka 4.x
(both clusters), whose group coordinator is Kafka's own."""

from __future__ import annotations

import pytest
from librdkafka_reader import read_to_end
from real_kafka import pairs
from source_groups import active_member, consume_and_commit, group_consumer

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


def _resume(bootstrap: str, group: str) -> dict[int, list[bytes]]:
    """Everything the group reads from its committed offsets to the end."""
    consumer = group_consumer(bootstrap, group)
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
    consumed = consume_and_commit(src.bootstrap, "billing", "orders", PARTITIONS, 137)
    consume_and_commit(src.bootstrap, "busy", "orders", PARTITIONS, 10)
    # "busy" has a member at the destination while the mirror runs: its offsets are its own.
    config = load_config(None, {"source.bootstrap": src.bootstrap, "destination.bootstrap": dst.bootstrap,
                                "topics": "orders", "once": True, "checkpoint": str(tmp_path / "ck"),
                                "groups": "billing|busy|absent", "max_records_per_trigger": 150})
    with active_member(dst.bootstrap, "busy", "orders"):
        totals = run_mirror(config)
    resumed = _resume(dst.bootstrap, "billing")
    # The source's batches of ten small records were coalesced: translation must stay exact across them.
    assert totals.counters.by_class["coalesced"].records > 0
    assert totals.groups is not None and totals.groups.synced == ["billing"]
    assert "busy" in totals.groups.skipped
    for p in range(PARTITIONS):
        # Exactly what the group had not consumed: no duplicate, no gap, in order.
        assert resumed[p] == produced[p][len(consumed[p]):]
