"""Small source batches, as a producer with little traffic writes them, coalesced on the way.

librdkafka writes the source with ``batch.size`` 2 KiB and ``linger.ms`` 0 (1 KiB records:
one or two a batch), keyed and unkeyed, with headers, tombstones and explicit timestamps,
and a transactional producer commits and aborts small transactions in between. The job
copies with its defaults (coalescing on) under ``preserve`` and, into another partition
count, ``by-key``. A read_committed librdkafka consumer must find every committed record,
exactly once, with its key, value, headers and timestamp, in order per partition (per key
under by-key, where librdkafka's murmur2 partitioner says), and the destination must hold far
fewer batches than the source. The destination broker is the judge of the batches: real
Kafka's ``LogValidator`` accepts or refuses every one.
"""

from __future__ import annotations

import random
import time
from collections import defaultdict

import pytest
from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewTopic
from java_partitioner import java_partitions
from librdkafka_reader import read_values
from real_kafka import pairs

import kcodecs
from mirror.config import load_config
from mirror.kafka import KafkaClient, TopicPartition

pytestmark = [pytest.mark.slow, pytest.mark.interop]

PARTITIONS = 3
RECORDS = 3000
T0 = int(time.time() * 1000) - 3_600_000
"""An hour ago: older records would fall to the destination's retention (7 days) at once."""


def _create(bootstrap: str, topics: dict[str, int]) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    for future in admin.create_topics([NewTopic(name, partitions) for name, partitions in topics.items()]).values():
        future.result(30)


def _write(bootstrap: str, topic: str, codec: str) -> list[tuple]:
    """The committed records, each ``(partition, key, value, headers, timestamp)``."""
    rng = random.Random(40)
    plain = Producer({"bootstrap.servers": bootstrap, "compression.type": codec, "batch.size": 2048,
                      "linger.ms": 0, "enable.idempotence": True})
    txn = Producer({"bootstrap.servers": bootstrap, "compression.type": codec, "batch.size": 2048, "linger.ms": 0,
                    "transactional.id": f"small-{topic}"})
    txn.init_transactions(30)
    committed = []
    for i in range(RECORDS):
        k = rng.randrange(200)
        key = None if i % 3 == 0 else b"key-%d" % k
        partition = i % PARTITIONS if key is None else k % PARTITIONS  # a key's records on one partition: one order
        value = None if i % 97 == 5 else bytes(rng.getrandbits(8) for _ in range(16)) + b"x" * 1000
        headers = [("n", b"%d" % i)] if i % 2 else None
        timestamp = T0 + i * 10 - (i % 7) * 3  # not in order within a partition
        if i % 50 == 10:  # a small transaction, committed or aborted
            txn.begin_transaction()
            txn.produce(topic, key=key, value=value, partition=partition, headers=headers, timestamp=timestamp)
            if i % 100 == 10:
                txn.abort_transaction(30)
                continue
            txn.commit_transaction(30)
        else:
            plain.produce(topic, key=key, value=value, partition=partition, headers=headers, timestamp=timestamp)
            if i % 20 == 0:
                plain.flush(30)  # flushes now and then: batches of one or two records
        committed.append((partition, key, value, [("n", b"%d" % i)] if headers else None, timestamp))
    assert plain.flush(30) == 0
    return committed


def _batches(bootstrap: str, topic: str, partitions: int) -> int:
    """Batches the cluster holds for ``topic``, markers included, as its fetch returns them."""
    count = 0
    with KafkaClient(bootstrap) as client:
        for p in range(partitions):
            offset, end = 0, client.list_offsets([TopicPartition(topic, p)], "latest")[TopicPartition(topic, p)]
            while offset < end:
                fetched = client.fetch(TopicPartition(topic, p), offset, max_bytes=1 << 20)
                for batch in kcodecs.iter_batches(fetched.records):
                    if batch.last_offset >= offset:
                        count += 1
                        offset = batch.last_offset + 1
    return count


def _take(message) -> tuple:
    headers = message.headers()
    return message.key(), message.value(), [(k, v) for k, v in headers] if headers else None, message.timestamp()[1]


@pytest.mark.parametrize("clusters", pairs("embedded", "kafka"), indirect=True)
@pytest.mark.parametrize("codec", ["lz4", "zstd"])
def test_small_batches_are_coalesced_and_every_record_arrives_as_it_was(tmp_path, clusters, codec):
    from mirror.spark.job import run_mirror

    src, dst = clusters.source, clusters.destination
    _create(src.bootstrap, {"small": PARTITIONS})
    _create(dst.bootstrap, {"small": PARTITIONS, "small.by-key": PARTITIONS + 1})
    sent = _write(src.bootstrap, "small", codec)

    common = {"source.bootstrap": src.bootstrap, "destination.bootstrap": dst.bootstrap, "topics": "small",
              "once": True}
    preserved = run_mirror(load_config(None, {**common, "checkpoint": str(tmp_path / "ck1")}))
    by_key = run_mirror(load_config(None, {**common, "checkpoint": str(tmp_path / "ck2"), "rename": "{topic}.by-key",
                                           "partitioning": "by-key"}))

    # The source as librdkafka reads it (two producers interleave, so their order is the log's).
    source = read_values(src.bootstrap, "small", PARTITIONS, take=_take)
    assert sorted(map(repr, (r for p in range(PARTITIONS) for r in source[p]))) == \
        sorted(repr(tuple(r[1:])) for r in sent)
    assert read_values(dst.bootstrap, "small", PARTITIONS, take=_take) == source

    # by-key: each key where librdkafka's Java-compatible partitioner puts it, per-key order kept.
    spread = read_values(dst.bootstrap, "small.by-key", PARTITIONS + 1, take=_take)
    keys = sorted({record[1] for record in sent if record[1] is not None})
    placed = java_partitions(dst.bootstrap, keys, PARTITIONS + 1)
    per_key: dict[bytes | None, list[tuple]] = defaultdict(list)
    for partition, records in spread.items():
        for record in records:
            assert record[0] is None or placed[record[0]] == partition, f"{record[0]!r} on {partition}"
            per_key[record[0] if record[0] is not None else partition].append(record)
    for key in keys:
        assert per_key[key] == [r for p in range(PARTITIONS) for r in source[p] if r[0] == key]
    for p in range(PARTITIONS):  # unkeyed records stay on their partition number, in order
        assert per_key[p] == [r for r in source[p] if r[0] is None]

    for totals in (preserved, by_key):
        assert totals.counters.by_class["coalesced"].records > RECORDS // 2
    source_batches = _batches(src.bootstrap, "small", PARTITIONS)
    assert _batches(dst.bootstrap, "small", PARTITIONS) < source_batches / 5


def test_a_merged_record_whose_value_is_bent_is_refused_by_kafka(kafka_destination):
    """A merge reads each record's framing and key, not its value and headers
    (``kcodecs.record_bytes``): Kafka's LogValidator, which reads every record of a batch it
    takes, is what refuses a bent one, and the copy then fails on a typed produce error. Two
    small lz4 batches from kafka-python, the second with a value length that runs past its
    record, are merged as the coalescer merges them and produced as they are."""
    from kafka.record.default_records import DefaultRecordBatchBuilder
    from real_kafka import produce_raw

    def small(value: bytes, *, bend: bool) -> kcodecs.V2Batch:
        builder = DefaultRecordBatchBuilder(2, 0, False, -1, -1, -1, batch_size=1 << 20)
        builder.append(0, T0, b"key", value, [])
        data = bytearray(builder.build())
        if bend:
            data[61 + 8] = 0x7E  # the value's length (after length, attributes, deltas, key): 63 bytes
        return kcodecs.read_batch(data)

    good = small(b"v" * 20, bend=False)
    records = kcodecs.record_bytes(good) + kcodecs.record_bytes(small(b"w" * 20, bend=True))
    merged = bytes(kcodecs.build_from_record_bytes(records, compression=kcodecs.Compression.LZ4, no_keys_flag=False))
    _create(kafka_destination.bootstrap, {"bent": 1})
    error, _ = produce_raw(kafka_destination.bootstrap, "bent", 0, merged)
    assert error in (2, 87), error  # CORRUPT_MESSAGE or INVALID_RECORD: refused, not appended
    # The same merge without the bent record is taken: the refusal is the record's, not the merge's.
    sound = bytes(kcodecs.build_from_record_bytes(records[:1], compression=kcodecs.Compression.LZ4, no_keys_flag=False))
    assert produce_raw(kafka_destination.bootstrap, "bent", 0, sound) == (0, 0)
