"""The bench's Spark mode: one timed micro-batch, after a warm-up query of many in the same JVM.

Counted from the destination, independently of the bench's own report: an exactly-once
micro-batch (kmirror run's default delivery) commits one transaction per copy task, which
writes a commit marker in each partition it wrote, so the markers in a topic count its
micro-batches."""

from __future__ import annotations

import time

import pytest

from kcodecs import Compression
from mirror.bench.copiers import WARM_UP_BYTES, copy_spark
from mirror.bench.datagen import DataSpec, Layout, build_dataset
from mirror.bench.fill import fill_topic
from mirror.bench.mode_run import ModeRun
from mirror.broker import EmbeddedBroker
from mirror.kafka import KafkaClient, NewTopic, TopicPartition

pytestmark = pytest.mark.slow

PARTITIONS = 2


def _held(bootstrap: str, topic: str) -> int:
    """Offsets taken in ``topic``: its records and its transaction markers."""
    with KafkaClient(bootstrap) as client:
        return sum(client.list_offsets([TopicPartition(topic, p) for p in range(PARTITIONS)], "latest").values())


def test_the_spark_mode_times_one_micro_batch_after_a_warm_up_query_of_many(tmp_path):
    now = time.time_ns() // 1_000_000
    data = build_dataset(DataSpec(Compression.LZ4, 1024, 100_000, partitions=PARTITIONS, base_timestamp_ms=now),
                         Layout.FLAGGED)
    with EmbeddedBroker(tmp_path / "source") as source, EmbeddedBroker(tmp_path / "destination") as destination:
        with KafkaClient(source.bootstrap) as client:
            fill_topic(client, "events", PARTITIONS, data)
        with KafkaClient(destination.bootstrap) as client:
            client.create_topics([NewTopic("events.copy", PARTITIONS)])
        run = ModeRun("pass-through-spark", source.bootstrap, destination.bootstrap, "events", "events.copy",
                      data.end_offsets(PARTITIONS), PARTITIONS, "lz4", 1 << 20, str(tmp_path / "work"), copy_tasks=1)
        sample = copy_spark(run)
        copied = _held(destination.bootstrap, "events.copy")
        warmed = _held(destination.bootstrap, "events.copy.spark-warm-up")
    assert copied == data.records + PARTITIONS  # the timed copy: one micro-batch, one transaction
    assert sample.copy_s > 0 and sample.routes["passed-through"] == data.records
    warm_up_records = WARM_UP_BYTES // 1024
    assert warmed - warm_up_records >= 8 * PARTITIONS  # markers: at least 8 micro-batches before the clock
