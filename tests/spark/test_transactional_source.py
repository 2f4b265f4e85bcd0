"""A source written by librdkafka's transactional producer, committing some transactions and
aborting others, mirrored by the Spark job in small rate-limited micro-batches: the destination
must hold exactly the committed records (what librdkafka's read_committed consumer reads at the
source), in order, including across an abort that falls after a micro-batch boundary and a
transaction still open while the mirror runs. On the embedded broker and on real Kafka 4.x (both
clusters), whose transaction coordinator writes the source's markers."""

from __future__ import annotations

import pytest
from confluent_kafka import Producer
from librdkafka_reader import read_values
from real_kafka import pairs

from mirror.config import load_config
from mirror.kafka import KafkaClient, NewTopic

pytestmark = pytest.mark.slow

PARTITIONS = 2


def _read(bootstrap: str, topic: str, isolation: str) -> dict[int, list[bytes]]:
    return read_values(bootstrap, topic, PARTITIONS, isolation=isolation)


class _Transactions:
    """librdkafka's transactional producer, one transaction at a time."""

    def __init__(self, bootstrap: str):
        self.producer = Producer({"bootstrap.servers": bootstrap, "transactional.id": "source-app",
                                  "compression.type": "lz4", "linger.ms": 1})
        self.producer.init_transactions(30)
        self.committed: dict[int, list[bytes]] = {p: [] for p in range(PARTITIONS)}

    def write(self, name: str, records: int) -> dict[int, list[bytes]]:
        self.producer.begin_transaction()
        written: dict[int, list[bytes]] = {p: [] for p in range(PARTITIONS)}
        for i in range(records):
            value = f"{name}-{i}".encode()
            self.producer.produce("orders", value=value, partition=i % PARTITIONS)
            written[i % PARTITIONS].append(value)
            if i % 7 == 6:
                self.producer.flush(30)  # several batches per transaction and partition
        self.producer.flush(30)
        return written

    def commit(self, written: dict[int, list[bytes]]) -> None:
        self.producer.commit_transaction(30)
        for p, values in written.items():
            self.committed[p] += values

    def abort(self) -> None:
        self.producer.abort_transaction(30)


@pytest.mark.parametrize("clusters", pairs("embedded", "kafka"), indirect=True)
def test_only_committed_source_transactions_reach_the_destination(tmp_path, clusters):
    from mirror.spark.job import run_mirror

    src, dst = clusters.source, clusters.destination
    with KafkaClient(src.bootstrap) as source:
        source.create_topics([NewTopic("orders", PARTITIONS)])
    txns = _Transactions(src.bootstrap)
    txns.commit(txns.write("t1", 60))
    txns.write("t2", 80)
    txns.abort()  # 40 records per partition, cut by the 15-record micro-batches below
    txns.commit(txns.write("t3", 30))
    open_ = txns.write("t4", 20)  # still open while the mirror runs
    config = load_config(None, {"source.bootstrap": src.bootstrap, "destination.bootstrap": dst.bootstrap,
                                "topics": "orders", "once": True, "checkpoint": str(tmp_path / "ck"),
                                "delivery": "exactly-once", "max_records_per_trigger": 30})
    first = run_mirror(config)
    assert _read(dst.bootstrap, "orders", "read_committed") == txns.committed  # t4 not yet
    txns.abort()
    del open_
    txns.commit(txns.write("t5", 10))
    second = run_mirror(config)
    source_committed = _read(src.bootstrap, "orders", "read_committed")
    destination_committed = _read(dst.bootstrap, "orders", "read_committed")
    destination_all = _read(dst.bootstrap, "orders", "read_uncommitted")
    assert source_committed == txns.committed  # librdkafka agrees with what the test wrote
    assert destination_committed == txns.committed
    # No attempt of ours was aborted, so nothing else is at the destination at all.
    assert destination_all == txns.committed
    aborted = first.counters.by_class["aborted"].records + second.counters.by_class["aborted"].records
    assert aborted == 80 + 20
