"""One tiny ``kmirror bench mirror`` end to end: two broker processes, every mode in its own
worker, each copy checked complete by the bench itself. Times are printed, never asserted."""

from __future__ import annotations

import argparse
import json

import pytest

from mirror.bench import broker_bench, mirror_bench


@pytest.mark.slow
def test_tiny_bench_runs_every_mode_and_writes_json(tmp_path, capsys):
    parser = argparse.ArgumentParser()
    mirror_bench.add_arguments(parser)
    out = tmp_path / "bench.json"
    args = parser.parse_args(["--codecs", "lz4", "--record-sizes", "1024", "--total-mb", "0.2", "--repeats", "1",
                              "--batch-kib", "16", "--json", str(out)])
    assert mirror_bench.run(args) == 0
    printed = capsys.readouterr().out
    assert "round 1/1  kafka-python" in printed and "Pass-through against the targets" in printed
    assert "lz4      1 KiB   16 KiB* " in printed  # the target scenario's line in the targets table
    document = json.loads(out.read_text())
    assert [r["mode"] for r in document["results"]] == list(mirror_bench.MODES)
    assert all(r["records_per_s"] > 0 and r["batches_per_s"] > 0 and r["cpu_s_per_gb"] >= 0 and r["peak_rss_mb"] > 0
               for r in document["results"])
    assert {(r["batch_bytes"], r["partitions"]) for r in document["results"]} == {(16384, 4)}
    assert all(8 * 1024 < r["mean_batch_bytes"] <= 16384 for r in document["results"])
    assert {r["versus"] for r in document["ratios"]} == set(mirror_bench.MODES) - {"pass-through"}
    assert document["parameters"]["total_bytes"] == 200_000


def test_broker_bench_reports_batches_per_second_and_profiles_both_phases(capsys):
    parser = argparse.ArgumentParser()
    broker_bench.add_arguments(parser)
    args = parser.parse_args(["--total-mb", "1", "--batch-kib", "16", "--partitions", "3", "--profile"])
    assert broker_bench.run(args) == 0
    printed = capsys.readouterr().out
    assert "over 3 partitions" in printed and "--batch-kib 16" in printed
    produce, fetch = (line for line in printed.splitlines() if "batches/s" in line)
    assert produce.split()[0] == "produce" and fetch.split()[0] == "fetch"
    assert "broker profile, produce phase" in printed and "broker profile, fetch phase" in printed
    assert "topics.py" in printed  # the broker's append path, not only the client, was profiled
