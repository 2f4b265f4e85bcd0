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


@pytest.mark.slow
@pytest.mark.parametrize("java_clients", [False, True], ids=["librdkafka", "java"])
def test_tiny_latency_bench_reads_every_record_of_each_mode(tmp_path, capsys, java_clients):
    """``kmirror bench latency`` end to end on two embedded brokers: the loop, and Kafka's own
    floor (a bare transactional producer), with librdkafka's clients and with Java's. Every
    record the load wrote is read at the destination (the probes apart), the percentiles are
    over records of the measured window, and the reader stops once it has read them all.
    With librdkafka, two rounds: the second starts with the other mode, and the spread table
    follows."""
    if java_clients:
        from mirror.realkafka import toolchain_problem

        if toolchain_problem() is not None:
            pytest.skip(toolchain_problem())
    from mirror.bench import latency_bench

    parser = argparse.ArgumentParser()
    latency_bench.add_arguments(parser)
    out = tmp_path / "latency.json"
    # Java's clients start from source (a few seconds of compiling): the warm-up covers it.
    args = parser.parse_args(["--modes", "loop,transactions", "--rate", "400", "--seconds", "2",
                              "--warmup", "8" if java_clients else "1", "--idle-seconds", "0", "--cluster-warmup", "0",
                              "--json", str(out), *(["--java-clients"] if java_clients else ["--runs", "2"])])
    assert latency_bench.run(args) == 0
    results = json.loads(out.read_text())["results"]
    order = [(r["mode"], r["run"]) for r in results]
    if java_clients:
        assert order == [("loop", 1), ("transactions", 1)]
    else:
        assert order == [("loop", 1), ("transactions", 1), ("transactions", 2), ("loop", 2)]
    for r in results:
        assert r["produced"] >= 400 * (args.warmup + args.seconds) * 0.9
        assert r["arrived"] == r["produced"]
        assert 0 < r["measured"] < r["arrived"] and 0 < r["p50_ms"] <= r["p99_ms"] <= r["max_ms"]
        assert 0 < r["source_p50_ms"] <= r["source_p99_ms"]
    printed = capsys.readouterr().out
    assert "source ack p50 / p99 ms" in printed
    assert ("| loop | 2 |" in printed and "| transactions | 2 |" in printed) != java_clients  # the spread table
