"""``kmirror bench latency --trace``'s reading of the copiers' trace files (mirror/engine/trace.py
writes them; tests/engine/test_copier.py checks what a real copier writes)."""

from __future__ import annotations

import json

from mirror.bench.trace_report import read_trace


def test_stages_are_timed_from_creation_and_from_the_stage_before_within_the_window(tmp_path):
    lines = [
        # created, fetched, routed, sent, acked, commit began, committed (seconds), records
        {"b": [100.000, 100.010, 100.011, 100.013, 100.020, 100.030, 100.050], "n": 10},
        {"b": [100.500, 100.600, 100.602, 100.700, 100.705, 100.710, 100.712], "n": 5},
        {"b": [99.000, 99.5, 99.6, 99.7, 99.8, 99.9, 100.0], "n": 7},  # created before the window
        {"s": "route", "at": 100.2, "wall": 0.030, "cpu": 0.001, "held": 15},  # a pause
        {"s": "flush", "at": 100.3, "wall": 0.100, "cpu": 0.001, "held": 15},  # waits on sockets
        {"s": "flush", "at": 100.4, "wall": 0.050, "cpu": 0.001, "held": 0},
        {"s": "route", "at": 98.0, "wall": 0.5, "cpu": 0.5, "held": 3},  # before the window
    ]
    (tmp_path / "trace-1.jsonl").write_text("".join(json.dumps(line) + "\n" for line in lines))
    report = read_trace(tmp_path, 100.0, 101.0)
    assert (report.batches, report.records) == (2, 15)
    # Two values: p50 is the first by the nearest rank, p90, p99 and max the second.
    assert [round(v, 3) for v in report.since_created["fetched"]] == [10.0, 100.0, 100.0, 100.0]
    assert [round(v, 3) for v in report.since_created["committed"]] == [50.0, 212.0, 212.0, 212.0]
    assert [round(v, 3) for v in report.steps["produce sent"]] == [2.0, 98.0, 98.0, 98.0]
    stalls = {s.kind: s for s in report.stalls}
    assert (stalls["route"].count, stalls["route"].pauses, stalls["route"].holding) == (1, 1, 1)
    assert (stalls["flush"].count, stalls["flush"].pauses, stalls["flush"].holding) == (2, 0, 1)
    assert round(stalls["flush"].total_s, 3) == 0.150 and round(stalls["flush"].max_s, 3) == 0.100
    assert "| produce acked |" in report.text()
