"""Prometheus metrics of a run, served by the driver (``--metrics-port``); see docs/metrics.md.

Everything is fed from what the driver already has after each micro-batch, the
:class:`~mirror.progress.MicroBatchReport` its tasks sent back, plus the errors it sees, so
the executors serve nothing and do no per-record work. The registry is the mirror's own, not
``prometheus_client``'s global one, so two runs in one process (tests) do not collide.

Replication latency and record age are exposed by a collector of our own: the latency
buckets are the exact counts the copy tasks made (:mod:`mirror.engine.latency`), and the
record age is computed at scrape time, so it grows while the mirror stands still.
"""

from __future__ import annotations

import threading
import time
from collections import defaultdict

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, start_http_server
from prometheus_client.core import GaugeMetricFamily, HistogramMetricFamily

from .engine.latency import LatencyHistogram
from .progress import MicroBatchReport

__all__ = ["MirrorMetrics", "MICRO_BATCH_BUCKETS"]

MICRO_BATCH_BUCKETS = (0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 120.0, 300.0, 600.0)
"""Seconds; a micro-batch takes from a fraction of a second to minutes (a large backlog)."""


class MirrorMetrics:
    """The run's metrics in a registry of their own; :meth:`serve` exposes them over HTTP."""

    def __init__(self) -> None:
        self.registry = CollectorRegistry()
        self._records = Counter("kmirror_records", "Source records copied (read), per routing class and source topic",
                                ["class", "topic"], registry=self.registry)
        self._bytes = Counter("kmirror_bytes", "Source bytes copied (read), per routing class and source topic",
                              ["class", "topic"], registry=self.registry)
        self._lag = Gauge("kmirror_partition_lag_offsets", "Source high watermark minus the offset copied up to, "
                          "as the last micro-batch that fetched the partition saw it", ["topic", "partition"],
                          registry=self.registry)
        self._duration = Histogram("kmirror_micro_batch_duration_seconds", "Wall time of a micro-batch on the driver",
                                   buckets=MICRO_BATCH_BUCKETS, registry=self.registry)
        self._micro_batches = Counter("kmirror_micro_batches", "Micro-batches completed", registry=self.registry)
        self._last_micro_batch = Gauge("kmirror_last_micro_batch_timestamp_seconds", "When the last micro-batch "
                                       "completed (seconds since the epoch)", registry=self.registry)
        self._errors = Counter("kmirror_errors", "Errors the driver saw, by class name (outages included)", ["kind"],
                               registry=self.registry)
        self._recreated = Counter("kmirror_source_topics_recreated", "Source topics the job found deleted and made "
                                  "again under their name (another topic id), and followed from their log start",
                                  ["topic"], registry=self.registry)
        self._lost = Counter("kmirror_destination_topics_lost", "Destination topics the job had copied into that "
                             "were deleted under it: made again and copied again from the source's log start "
                             "(copied_again), or, the user's, not copied any more (not_copied)", ["topic", "outcome"],
                             registry=self.registry)
        self._topic_ids: dict[str, str] = {}
        """The id of the source topic each topic's last ranges were of."""
        self._copiers = Gauge("kmirror_copiers", "Resident copiers the job started (copy tasks that stream between "
                              "micro-batches); 0 where copies run only inside micro-batches", registry=self.registry)
        self._collected = _Collected()
        self.registry.register(self._collected)
        self._server = None

    def observe(self, report: MicroBatchReport) -> None:
        """One completed micro-batch."""
        self._micro_batches.inc()
        self._last_micro_batch.set_to_current_time()
        self._duration.observe(report.seconds)
        records: dict[tuple[str, str], int] = defaultdict(int)
        size: dict[tuple[str, str], int] = defaultdict(int)
        newest: dict[str, int] = {}
        for stats in report.ranges:
            for route, counts in stats.counters.by_class.items():
                records[route.value, stats.tp.topic] += counts.records
                size[route.value, stats.tp.topic] += counts.bytes
            if stats.max_timestamp >= 0:
                newest[stats.tp.topic] = max(stats.max_timestamp, newest.get(stats.tp.topic, -1))
            if stats.topic_id is not None:
                if self._topic_ids.setdefault(stats.tp.topic, stats.topic_id) != stats.topic_id:
                    self._recreated.labels(stats.tp.topic).inc()
                    self._topic_ids[stats.tp.topic] = stats.topic_id
        for labels, n in records.items():
            if n:
                self._records.labels(*labels).inc(n)
        for labels, n in size.items():
            if n:
                self._bytes.labels(*labels).inc(n)
        for tp, lag in report.lag.items():
            self._lag.labels(tp.topic, str(tp.partition)).set(lag)
        self._collected.add(report.latency, newest)

    def error(self, kind: str) -> None:
        """An error the driver saw, by class name (e.g. ``ClusterUnreachableError``)."""
        self._errors.labels(kind).inc()

    def destination_lost(self, topic: str, copied_again: bool) -> None:
        """A destination topic lost under the job (:mod:`mirror.engine.destination_loss`)."""
        self._lost.labels(topic, "copied_again" if copied_again else "not_copied").inc()

    def copiers(self, started: int) -> None:
        """The resident copiers the job started (once its executors are ready)."""
        self._copiers.set(started)

    def serve(self, port: int, addr: str = "0.0.0.0") -> None:
        self._server, _ = start_http_server(port, addr, registry=self.registry)

    def close(self) -> None:
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
            self._server = None


class _Collected:
    """The replication latency histogram, merged from the tasks' exact bucket counts, and the
    age of the newest copied record per topic, computed when scraped."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._latency = LatencyHistogram()
        self._newest_ms: dict[str, int] = {}

    def add(self, latency: LatencyHistogram, newest_ms: dict[str, int]) -> None:
        with self._lock:
            self._latency.merge(latency)
            for topic, ms in newest_ms.items():
                self._newest_ms[topic] = max(ms, self._newest_ms.get(topic, -1))

    def collect(self):
        with self._lock:
            buckets, total = self._latency.cumulative(), self._latency.sum
            newest = dict(self._newest_ms)
        yield HistogramMetricFamily("kmirror_replication_latency_seconds",
                                    "Destination acknowledgement time minus the source batch's max timestamp, "
                                    "per produced batch", buckets=buckets, sum_value=total)
        age = GaugeMetricFamily("kmirror_record_age_seconds", "Now minus the newest source timestamp copied, per "
                                "source topic", labels=["topic"])
        now = time.time()
        for topic, ms in sorted(newest.items()):
            age.add_metric([topic], max(0.0, now - ms / 1000))
        yield age
