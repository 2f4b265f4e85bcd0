"""The per-micro-batch progress line and the closing summary, from hand-built statistics."""

from __future__ import annotations

from mirror.engine import RangeStats
from mirror.kafka import TopicPartition
from mirror.progress import LAG_SHOWN, MicroBatchReport, RunTotals
from mirror.routing import RouteClass, RouteCounters


def _stats(topic: str, partition: int, *, end: int, hw: int, passed=(0, 0, 0), rebuilt=(0, 0, 0), lost=0) -> RangeStats:
    counters = RouteCounters()
    for route, (batches, records, size) in ((RouteClass.PASSED_THROUGH, passed), (RouteClass.REBUILT, rebuilt)):
        counts = counters.by_class[route]
        counts.batches, counts.records, counts.bytes = batches, records, size
    return RangeStats(TopicPartition(topic, partition), 0, end, high_watermark=hw, counters=counters,
                      lost_records=lost, produced_batches=passed[0] + rebuilt[0], produced_bytes=passed[2] + rebuilt[2])


def test_the_line_has_records_rate_classes_and_lag_per_partition():
    report = MicroBatchReport(7, 2.0, [
        _stats("a", 0, end=100, hw=130, passed=(4, 100, 3_000_000)),
        _stats("b", 1, end=50, hw=50, rebuilt=(1, 50, 1_000_000)),
    ])
    line = report.line()
    assert line.startswith("batch 7: 150 records, 3.8 MiB from 2 partitions in 2.00 s (2.0 MB/s)")
    assert "passed-through 4 batches/100 records, rebuilt 1 batches/50 records" in line
    assert "inspected" not in line and "LOST" not in line
    assert line.endswith("lag 30 [a/0=30 b/1=0]")


def test_aborted_transactions_show_as_a_class_of_their_own():
    stats = _stats("t", 0, end=40, hw=40, passed=(2, 20, 2000))
    aborted = stats.counters.by_class[RouteClass.ABORTED]
    aborted.batches, aborted.records, aborted.bytes = 3, 15, 1500
    report = MicroBatchReport(4, 1.0, [stats])
    assert "passed-through 2 batches/20 records, aborted 3 batches/15 records;" in report.line()
    totals = RunTotals()
    totals.add(report)
    (row,) = [line for line in totals.summary().splitlines() if line.strip().startswith("aborted")]
    assert row.split()[1:5] == ["3", "batches", "15", "records"]


def test_long_lag_lists_are_cut_to_the_laggiest_partitions():
    ranges = [_stats("t", p, end=0, hw=p) for p in range(LAG_SHOWN + 3)]
    line = MicroBatchReport(0, 1.0, ranges).line()
    total = sum(range(LAG_SHOWN + 3))
    assert f"lag {total} [t/{LAG_SHOWN + 2}={LAG_SHOWN + 2} " in line
    assert "(+3 partitions, 3 more)" in line  # partitions 0, 1 and 2 are the least behind


def test_lost_records_are_loud_in_the_line_and_the_summary():
    report = MicroBatchReport(1, 1.0, [_stats("t", 0, end=10, hw=10, passed=(1, 5, 100), lost=5)], task_seconds=0.25)
    assert "LOST 5 records" in report.line()
    totals = RunTotals()
    totals.add(report)
    totals.add(MicroBatchReport(2, 1.0, [_stats("t", 0, end=20, hw=20, passed=(2, 10, 200))], task_seconds=0.25))
    summary = totals.summary()
    assert summary.startswith("kmirror copied 15 records") and "in 2 micro-batches, 2.0 s" in summary
    assert "0.5 s of it in copy tasks" in summary
    assert "LOST 5 records" in summary and "produced 3 batches" in summary
    assert totals.counters.by_class[RouteClass.PASSED_THROUGH].batches == 3


def test_a_replayed_micro_batch_says_which_ranges_the_destination_already_had():
    fresh = _stats("t", 0, end=40, hw=40, passed=(2, 20, 2000))
    skipped = RangeStats(TopicPartition("t", 1), 0, 40, already_committed=True)
    line = MicroBatchReport(9, 1.0, [fresh, skipped]).line()
    assert "; 1 ranges already at the destination (replayed micro-batch)" in line
    assert "already" not in MicroBatchReport(9, 1.0, [fresh]).line()
    # The skipped range fetched nothing: no high watermark, no lag claimed for it.
    assert line.endswith("lag 0 [t/0=0]")
    assert "lag" not in MicroBatchReport(9, 1.0, [skipped]).line()
