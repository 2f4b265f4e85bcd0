"""``kmirror verify`` on real Apache Kafka (issue 52): its verdicts against destinations no kmirror
code wrote, and against a mirror ``kmirror run`` made.

- Kafka's own Java producer (tests/support/JavaCopy.java) writes destinations from the records
  librdkafka read at the source: a faithful copy, and one with a record left out, one written
  twice and one altered. Each edit is found at the offset the test put it at.
- A by-key pair (6 source partitions to 4) that ``kmirror run`` mirrored: ``kmirror verify``
  passes it, with librdkafka's count of the source's records on both sides.
"""

from __future__ import annotations

import json
import subprocess
import sys
import time

import pytest
from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewTopic

from java_copy import java_produce
from librdkafka_reader import read_values
from mirror.config import ClusterConfig, RetryConfig, load_config
from mirror.engine.offset_syncs import SyncEntry
from mirror.engine.verify_plan import plan_pair
from mirror.kafka import TopicPartition
from mirror.realkafka import KAFKA_4

pytestmark = [pytest.mark.slow, pytest.mark.interop]


def _create(bootstrap: str, topics: dict[str, int]) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})  # kept until the futures are done
    for future in admin.create_topics([NewTopic(name, partitions) for name, partitions in topics.items()]).values():
        future.result(30)


def _take(message):
    return message.key(), message.value(), message.headers() or [], message.timestamp()[1]


def test_edits_made_by_javas_producer_are_each_found_at_their_offset(kafka_source, kafka_destination, kafka_jars):
    from mirror.spark.session import spark_session
    from mirror.spark.verify import Finding, compare_pair
    from mirror.verify_cli import _compiling

    jars = kafka_jars(KAFKA_4)
    _create(kafka_source.bootstrap, {"verify.src": 1})
    _create(kafka_destination.bootstrap, {"verify.good": 1, "verify.bad": 1})
    producer = Producer({"bootstrap.servers": kafka_source.bootstrap, "linger.ms": 5, "compression.type": "lz4"})
    # Recent times: the shared clusters run for the whole suite, and Kafka's 7-day retention
    # deletes a segment of older records at its next check.
    now_ms = int(time.time() * 1000) - 60_000
    for i in range(100):
        producer.produce("verify.src", key=None if i % 10 == 9 else b"k%d" % (i % 5), value=b"v%d" % i, partition=0,
                         headers=[("h", b"%d" % i)] if i % 4 == 0 else None, timestamp=now_ms + i)
    assert producer.flush(30) == 0
    records = read_values(kafka_source.bootstrap, "verify.src", 1, take=_take)[0]
    java_produce(jars, kafka_destination.bootstrap, "verify.good",
                 [(0, key, value, timestamp, headers) for key, value, headers, timestamp in records])
    broken = list(records)
    del broken[10]  # source offset 10 left out
    broken.insert(40, broken[39])  # source offset 40 written twice: destination offsets 39 and 40
    broken[70] = (broken[70][0], b"altered", broken[70][2], broken[70][3])  # destination offset 70
    java_produce(jars, kafka_destination.bootstrap, "verify.bad",
                 [(0, key, value, timestamp, headers) for key, value, headers, timestamp in broken])

    config = load_config(None, {"source.bootstrap": kafka_source.bootstrap,
                                "destination.bootstrap": kafka_destination.bootstrap, "topics": "verify.src",
                                "master": "local[2]"})
    spark = spark_session(_compiling(config))
    found = {}
    for name in ("verify.good", "verify.bad"):
        entries = [SyncEntry(TopicPartition("verify.src", 0), 0, 99, TopicPartition(name, 0), 0, 100, False)]
        plan = plan_pair("verify.src", name, by_key=False, destination_partitions=1, entries=entries,
                         committed={0: 100})
        found[name] = compare_pair(spark, plan, ClusterConfig(bootstrap=[kafka_source.bootstrap]),
                                   ClusterConfig(bootstrap=[kafka_destination.bootstrap]), RetryConfig())
    assert (found["verify.good"].source_records, found["verify.good"].findings) == (100, ())
    assert found["verify.bad"].findings == (Finding("altered", "verify.bad", 0, 1, 70),
                                            Finding("duplicated", "verify.bad", 0, 1, 40),
                                            Finding("missing", "verify.src", 0, 1, 10))


def _verify(source: str, destination: str, *flags: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "mirror.cli", "verify", "--source", source,
                           "--destination", destination, "--topics", r"verify\.keyed", "--name", "verified",
                           "--master", "local[2]", "--json", *flags], capture_output=True, text=True, timeout=300)


def test_a_by_key_mirror_kmirror_made_verifies_with_librdkafkas_counts(kafka_source, kafka_destination, tmp_path):
    from mirror.spark.job import run_mirror

    _create(kafka_source.bootstrap, {"verify.keyed": 6})
    _create(kafka_destination.bootstrap, {"verify.keyed": 4})
    producer = Producer({"bootstrap.servers": kafka_source.bootstrap, "linger.ms": 20, "compression.type": "zstd",
                         "partitioner": "consistent_random"})
    for i in range(3000):
        producer.produce("verify.keyed", key=b"customer-%d" % (i * 7 % 120), value=b"order-%05d" % i)
    assert producer.flush(30) == 0
    written = sum(map(len, read_values(kafka_source.bootstrap, "verify.keyed", 6).values()))
    run_mirror(load_config(None, {"source.bootstrap": kafka_source.bootstrap,
                                  "destination.bootstrap": kafka_destination.bootstrap, "topics": r"verify\.keyed",
                                  "partitioning": "by-key", "once": True, "name": "verified",
                                  "checkpoint": str(tmp_path / "ck")}))
    clean = _verify(kafka_source.bootstrap, kafka_destination.bootstrap)
    assert clean.returncode == 0, clean.stderr[-3000:]
    (report,) = json.loads(clean.stdout)
    assert (report["source_records"], report["destination_records"], report["findings"]) == (written, written, [])
