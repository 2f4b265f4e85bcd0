"""Prometheus metrics from hand-built micro-batch reports: the latency histograms the tasks send
merge exactly, and the scraped text, read back by prometheus_client's own parser, holds what
the reports said."""

from __future__ import annotations

import pickle
import time

import pytest
from prometheus_client import generate_latest
from prometheus_client.parser import text_string_to_metric_families
from prometheus_scrape import free_port, scrape_text

from mirror.engine import RangeStats
from mirror.engine.latency import BUCKETS, LatencyHistogram
from mirror.kafka import TopicPartition
from mirror.metrics import MirrorMetrics
from mirror.progress import MicroBatchReport
from mirror.routing import RouteClass, RouteCounters


def _histogram(*seconds: float) -> LatencyHistogram:
    histogram = LatencyHistogram()
    for s in seconds:
        histogram.observe(s)
    return histogram


def test_latency_histograms_merge_to_the_counts_of_all_their_observations():
    a, b = _histogram(0.001, 0.005, 0.3), _histogram(7.0, 5000.0, -2.0)
    a.merge(pickle.loads(pickle.dumps(b)))  # as a task's travels to the driver
    assert a.counts == _histogram(0.001, 0.005, 0.3, 7.0, 5000.0, -2.0).counts
    assert a.count == 6 and a.sum == pytest.approx(0.001 + 0.005 + 0.3 + 7.0 + 5000.0)
    cumulative = dict(a.cumulative())
    assert cumulative["0.005"] == 3  # -2 (a clock skew) counts as 0; a bound is inclusive
    assert cumulative["0.5"] == 4 and cumulative["10.0"] == 5 and cumulative["+Inf"] == 6
    assert list(cumulative) == [*map(str, BUCKETS), "+Inf"]


def _stats(topic: str, partition: int, *, end: int, hw: int, records: int, size: int, newest_ms: int) -> RangeStats:
    counters = RouteCounters()
    counts = counters.by_class[RouteClass.PASSED_THROUGH]
    counts.batches, counts.records, counts.bytes = 1, records, size
    return RangeStats(TopicPartition(topic, partition), 0, end, high_watermark=hw, counters=counters,
                      max_timestamp=newest_ms)


def _samples(registry) -> dict[tuple[str, tuple], float]:
    text = generate_latest(registry).decode()
    return {(s.name, tuple(sorted(s.labels.items()))): s.value
            for family in text_string_to_metric_families(text) for s in family.samples}


def test_the_registry_holds_what_the_reports_said():
    metrics = MirrorMetrics()
    now_ms = int(time.time() * 1000)
    metrics.observe(MicroBatchReport(0, 1.5, [
        _stats("orders", 0, end=100, hw=130, records=100, size=5000, newest_ms=now_ms - 60_000),
        _stats("orders", 1, end=40, hw=40, records=40, size=2000, newest_ms=now_ms - 10_000),
        RangeStats(TopicPartition("audit", 0), 0, 10, already_committed=True),  # a replay: no lag known
    ], latency=_histogram(0.02, 0.2)))
    metrics.observe(MicroBatchReport(1, 0.2, [
        _stats("orders", 0, end=130, hw=135, records=30, size=1500, newest_ms=now_ms - 5_000),
    ], latency=_histogram(3.0)))
    metrics.error("ClusterUnreachableError")
    metrics.error("ClusterUnreachableError")
    metrics.error("CorruptSourceError")
    samples = _samples(metrics.registry)

    passed = (("class", "passed-through"), ("topic", "orders"))
    assert samples["kmirror_records_total", passed] == 170
    assert samples["kmirror_bytes_total", passed] == 8500
    assert samples["kmirror_partition_lag_offsets", (("partition", "0"), ("topic", "orders"))] == 5
    assert samples["kmirror_partition_lag_offsets", (("partition", "1"), ("topic", "orders"))] == 0
    assert not [key for key in samples if ("topic", "audit") in key[1]]
    assert samples["kmirror_micro_batches_total", ()] == 2
    assert samples["kmirror_micro_batch_duration_seconds_count", ()] == 2
    assert samples["kmirror_micro_batch_duration_seconds_sum", ()] == pytest.approx(1.7)
    assert samples["kmirror_replication_latency_seconds_count", ()] == 3
    assert samples["kmirror_replication_latency_seconds_sum", ()] == pytest.approx(3.22)
    assert samples["kmirror_replication_latency_seconds_bucket", (("le", "0.025"),)] == 1
    assert samples["kmirror_replication_latency_seconds_bucket", (("le", "0.25"),)] == 2
    assert samples["kmirror_replication_latency_seconds_bucket", (("le", "+Inf"),)] == 3
    assert 5 <= samples["kmirror_record_age_seconds", (("topic", "orders"),)] < 30  # the newest, not the last
    assert samples["kmirror_errors_total", (("kind", "ClusterUnreachableError"),)] == 2
    assert samples["kmirror_errors_total", (("kind", "CorruptSourceError"),)] == 1


def test_a_source_topic_made_again_is_counted_once_when_its_ranges_change_id():
    metrics = MirrorMetrics()
    tp, other = TopicPartition("orders", 0), TopicPartition("audit", 0)
    for batch, ids in enumerate([("a", "x"), ("a", "x"), ("b", "x"), ("b", None)]):
        metrics.observe(MicroBatchReport(batch, 0.1, [RangeStats(tp, 0, 1, topic_id=ids[0]),
                                                      RangeStats(other, 0, 1, topic_id=ids[1])]))
    samples = _samples(metrics.registry)
    assert samples["kmirror_source_topics_recreated_total", (("topic", "orders"),)] == 1
    assert ("kmirror_source_topics_recreated_total", (("topic", "audit"),)) not in samples


def test_the_endpoint_serves_the_registry():
    metrics = MirrorMetrics()
    port = free_port()
    metrics.serve(port)
    try:
        metrics.error("ProtocolError")
        text = scrape_text(port)
    finally:
        metrics.close()
    families = {family.name for family in text_string_to_metric_families(text)}
    assert {"kmirror_errors", "kmirror_replication_latency_seconds", "kmirror_micro_batches"} <= families


def test_status_reads_a_running_jobs_endpoint():
    """``kmirror status --metrics-url``: what the job's endpoint says, read as a scraper reads it."""
    from mirror.status_cli import running_job

    metrics = MirrorMetrics()
    port = free_port()
    metrics.serve(port)
    try:
        url = f"http://127.0.0.1:{port}/metrics"
        assert running_job(url) == {"up": True, "copiers": 0, "micro_batches": 0, "since_last_micro_batch_s": None,
                                    "errors": {}}
        metrics.copiers(3)
        metrics.observe(MicroBatchReport(0, 0.5, [], latency=_histogram()))
        metrics.error("ConnectionFailedError")
        job = running_job(url)
    finally:
        metrics.close()
    assert job["up"] and job["copiers"] == 3 and job["micro_batches"] == 1
    assert job["errors"] == {"ConnectionFailedError": 1}
    assert 0 <= job["since_last_micro_batch_s"] < 60
    assert running_job(url)["up"] is False  # closed: not answering


def test_a_lost_destination_topic_is_counted_by_what_became_of_its_source():
    metrics = MirrorMetrics()
    metrics.destination_lost("events", True)
    metrics.destination_lost("theirs", False)
    samples = _samples(metrics.registry)
    assert samples["kmirror_destination_topics_lost_total", (("outcome", "copied_again"), ("topic", "events"))] == 1
    assert samples["kmirror_destination_topics_lost_total", (("outcome", "not_copied"), ("topic", "theirs"))] == 1
