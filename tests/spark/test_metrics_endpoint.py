"""``metrics_port``: a ``once`` run between two embedded brokers serves Prometheus metrics
over HTTP while it runs; scraped after each micro-batch (from ``on_report``), the last scrape
holds the records copied, the lag and replication latency samples."""

from __future__ import annotations

import time

import pytest
from prometheus_scrape import scrape

import kcodecs
from kcodecs import Record
from mirror.bench.latency_proxy import free_port
from mirror.broker import EmbeddedBroker
from mirror.config import load_config
from mirror.kafka import KafkaClient, NewTopic, TopicPartition

pytestmark = pytest.mark.slow

PARTITIONS, BATCHES, PER_BATCH = 2, 10, 10


def test_a_run_serves_its_metrics_over_http(tmp_path):
    from mirror.spark.job import run_mirror

    port = free_port()
    began = time.time()
    with EmbeddedBroker(tmp_path / "src") as src, EmbeddedBroker(tmp_path / "dst") as dst:
        with KafkaClient(src.bootstrap) as source:
            source.create_topics([NewTopic("orders", PARTITIONS)])
            for p in range(PARTITIONS):
                for b in range(BATCHES):
                    stamped = int(time.time() * 1000)  # as a producer stamps (CreateTime)
                    records = [Record(key=None, value=b"p%d-%d-%d" % (p, b, i), timestamp=stamped)
                               for i in range(PER_BATCH)]
                    source.produce([(TopicPartition("orders", p), kcodecs.build_batch(records, compression="lz4"))])
        # Every source batch produced as it is (no coalescing): one latency observation each.
        config = load_config(None, {"source.bootstrap": src.bootstrap, "destination.bootstrap": dst.bootstrap,
                                    "coalesce_below_bytes": 0,
                                    "topics": "orders", "once": True, "checkpoint": str(tmp_path / "ck"),
                                    "metrics_port": port})
        scrapes = []
        totals = run_mirror(config, on_report=lambda report: scrapes.append(scrape(port)))
        with pytest.raises(OSError):  # the endpoint ends with the run
            scrape(port)
    assert scrapes, "no micro-batch reported"
    last = scrapes[-1]
    copied = sum(v for (name, labels), v in last.items()
                 if name == "kmirror_records_total" and ("topic", "orders") in labels)
    assert copied == totals.counters.total_records == PARTITIONS * BATCHES * PER_BATCH
    assert sum(v for (name, _), v in last.items() if name == "kmirror_bytes_total") > 0
    assert last["kmirror_micro_batches_total", ()] == len(scrapes)
    for p in range(PARTITIONS):
        assert last["kmirror_partition_lag_offsets", (("partition", str(p)), ("topic", "orders"))] == 0
    # One latency sample per produced batch: every source batch is forwarded as one.
    assert last["kmirror_replication_latency_seconds_count", ()] == PARTITIONS * BATCHES
    assert 0 < last["kmirror_replication_latency_seconds_sum", ()] < PARTITIONS * BATCHES * (time.time() - began)
    assert 0 <= last["kmirror_record_age_seconds", (("topic", "orders"),)] < time.time() - began + 60
    assert last["kmirror_micro_batch_duration_seconds_count", ()] == len(scrapes)
