"""What the job tells its operator: one line per micro-batch, one summary at the end.

Pure formatting over :class:`~mirror.engine.copy.RangeStats`, so the lines are tested
without Spark. Lag is the source high watermark (as the task last saw it) minus the offset
the micro-batch copied up to, per partition, the number a Kafka consumer-lag dashboard shows.
Records and bytes are what was read from the source, per routing class: the ``dropped``
transaction markers and the ``aborted`` transactions' batches, read and not produced, show
as classes of their own.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from .engine.ranges import RangeStats
from .engine.latency import LatencyHistogram
from .engine.group_sync import GroupSyncReport
from .kafka import TopicPartition
from .routing import RouteClass, RouteCounters

__all__ = ["MicroBatchReport", "RunTotals", "LAG_SHOWN"]

LAG_SHOWN = 8
"""Partitions listed by name in a progress line (the laggiest); the rest are summed."""


def _mib(n: int) -> str:
    return f"{n / 2**20:.1f} MiB"


def _classes(counters: RouteCounters) -> str:
    parts = []
    for route in RouteClass:
        counts = counters.by_class[route]
        if counts.batches:
            parts.append(f"{route.value} {counts.batches} batches/{counts.records} records")
    return ", ".join(parts) or "no batches"


@dataclass
class MicroBatchReport:
    batch_id: int
    seconds: float
    ranges: list[RangeStats]
    task_seconds: float = 0.0
    """Time the copy tasks took, summed over tasks (each copies a group of ranges)."""
    groups: GroupSyncReport | None = None
    """The group offset translation that ran after this micro-batch, if one did."""
    latency: LatencyHistogram = field(default_factory=LatencyHistogram)
    """Replication latency of the micro-batch's produced batches, every task's merged."""

    @property
    def counters(self) -> RouteCounters:
        total = RouteCounters()
        for stats in self.ranges:
            total.merge(stats.counters)
        return total

    @property
    def lag(self) -> dict[TopicPartition, int]:
        """Per partition that was fetched: a range an earlier attempt had committed (a replay)
        fetched nothing, so it knows no high watermark and says nothing about lag."""
        return {stats.tp: stats.lag for stats in self.ranges if stats.high_watermark >= 0}

    def line(self) -> str:
        counters = self.counters
        records, size = counters.total_records, counters.total_bytes
        rate = size / self.seconds / 1e6 if self.seconds > 0 else 0.0
        lag = sorted(self.lag.items(), key=lambda item: (-item[1], item[0]))
        shown = " ".join(f"{tp}={n}" for tp, n in lag[:LAG_SHOWN])
        more = f" (+{len(lag) - LAG_SHOWN} partitions, {sum(n for _, n in lag[LAG_SHOWN:])} more)" if len(lag) > LAG_SHOWN else ""
        lost = sum(stats.lost_records for stats in self.ranges)
        committed = sum(1 for stats in self.ranges if stats.already_committed)
        return (f"batch {self.batch_id}: {records} records, {_mib(size)} from {len(self.ranges)} partitions "
                f"in {self.seconds:.2f} s ({rate:.1f} MB/s); {_classes(counters)}"
                + (f"; LOST {lost} records" if lost else "")
                + (f"; {committed} ranges already at the destination (replayed micro-batch)" if committed else "")
                + (f"; {self.groups.line()}" if self.groups is not None else "")
                + (f"; lag {sum(n for _, n in lag)} [{shown}{more}]" if lag else ""))


@dataclass
class RunTotals:
    """Everything the run copied, for the closing summary (and for ``kmirror demo``)."""

    micro_batches: int = 0
    seconds: float = 0.0
    task_seconds: float = 0.0
    """Time the copy tasks themselves took, summed; the rest of ``seconds`` is Spark's scheduling."""
    counters: RouteCounters = field(default_factory=RouteCounters)
    lost_records: int = 0
    produced_batches: int = 0
    produced_bytes: int = 0
    groups: GroupSyncReport | None = None
    """The last group offset translation."""

    def add(self, report: MicroBatchReport) -> None:
        self.micro_batches += 1
        self.seconds += report.seconds
        self.task_seconds += report.task_seconds
        self.counters.merge(report.counters)
        self.lost_records += sum(stats.lost_records for stats in report.ranges)
        self.produced_batches += sum(stats.produced_batches for stats in report.ranges)
        self.produced_bytes += sum(stats.produced_bytes for stats in report.ranges)
        self.groups = report.groups or self.groups

    def summary(self) -> str:
        counters = self.counters
        rate = counters.total_bytes / self.seconds / 1e6 if self.seconds > 0 else 0.0
        rows = [f"  {route.value:<15} {c.batches:>9} batches {c.records:>11} records {_mib(c.bytes):>12}"
                for route, c in counters.by_class.items()]
        return "\n".join([
            f"kmirror copied {counters.total_records} records ({_mib(counters.total_bytes)} of source batches) "
            f"in {self.micro_batches} micro-batches, {self.seconds:.1f} s of copying ({rate:.1f} MB/s, "
            f"{self.task_seconds:.1f} s of it in copy tasks); "
            f"produced {self.produced_batches} batches, {_mib(self.produced_bytes)}"
            + (f"; LOST {self.lost_records} records to source retention" if self.lost_records else ""),
            *rows,
            *([f"  last group offset translation: {self.groups.line()}"] if self.groups is not None else []),
        ])

