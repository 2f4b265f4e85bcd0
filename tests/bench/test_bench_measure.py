"""How the bench measures: worker specs, process-tree accounting, the checks that refuse a bad
sample, the command line, and the plot."""

from __future__ import annotations

import argparse
import json
import resource
import subprocess
import sys
import time

import pytest

from kcodecs import Compression
from mirror.bench import mirror_bench
from mirror.bench.datagen import DataSpec, Layout, build_dataset
from mirror.bench.mirror_bench import BenchError, check_copy, settings_from
from mirror.bench.mode_run import ModeRun
from mirror.bench.proctree import TreeMeter, parse_stat, tree_pids
from mirror.bench.stats import ModeResult, Sample, Scenario
from mirror.bench.worker import measure, peak_rss_bytes


def spec(mode: str = "recompress", ends=(60, 40)) -> ModeRun:
    return ModeRun(mode, "127.0.0.1:1", "127.0.0.1:2", "t", "t.recompress.1", tuple(ends), 3, "zstd", 1 << 20, "/tmp/x")


def parse(*argv: str) -> argparse.Namespace:
    parser = argparse.ArgumentParser()
    mirror_bench.add_arguments(parser)
    return parser.parse_args(argv)


def test_mode_run_round_trips_through_json():
    run = spec()
    assert ModeRun.from_json(run.to_json()) == run and run.records == 100


def test_check_copy_refuses_missing_records_and_the_wrong_route():
    check_copy(spec(), Sample(1, 1, 1, {"rebuilt": 96, "inspected": 4}), 100, 96)  # 4 sat in batches that go whole
    with pytest.raises(BenchError, match="holds 99 records"):
        check_copy(spec(), Sample(1, 1, 1, {"rebuilt": 100}), 99, 100)
    with pytest.raises(BenchError, match="expected 96 of the 100 records rebuilt"):
        check_copy(spec(), Sample(1, 1, 1, {"rebuilt": 90, "inspected": 10}), 100, 96)
    with pytest.raises(BenchError, match="passed-through"):
        check_copy(spec("pass-through"), Sample(1, 1, 1, {"passed-through": 99, "inspected": 1}), 100, 100)
    check_copy(spec("confluent-kafka"), Sample(1, 1, 1), 100, 100)  # peers have no routes to check
    with pytest.raises(BenchError, match="deleted 40 of the copied records"):
        check_copy(spec(), Sample(1, 1, 1, {"rebuilt": 96, "inspected": 4}), 100, 96, deleted=40)


@pytest.mark.parametrize("record_bytes, kept", [(1024, True), (10240, False)])
def test_recompress_is_left_out_where_batches_go_whole_to_one_partition(record_bytes, kept, capsys):
    # Without a codec a 16 KiB batch holds 15 records of 1 KiB, or one of 10 KiB, which no key can split.
    data_spec = DataSpec(Compression.NONE, record_bytes, 400_000, 16 * 1024, partitions=4)
    keyed = build_dataset(data_spec, Layout.KEYED)
    modes = mirror_bench._measurable(mirror_bench.MODES, data_spec, {Layout.KEYED: keyed}, "none")
    assert ("recompress" in modes) is kept and len(modes) == len(mirror_bench.MODES) - (not kept)
    assert ("recompress left out: only 0% of the keyed records" in capsys.readouterr().out) is not kept


def test_quick_preset_has_16_kib_batches_and_overrides_and_spark():
    quick = settings_from(parse("--quick"))
    assert quick.scenarios == tuple(Scenario(codec, 1024, kib * 1024, 4) for codec in ("lz4", "zstd") for kib in (16, 128))
    assert quick.modes == mirror_bench.MODES
    custom = settings_from(parse("--quick", "--codecs", "none", "--record-sizes", "100,10240", "--batch-kib", "1024",
                                 "--partitions", "2", "--spark", "--repeats", "1"))
    assert custom.scenarios == (Scenario("none", 100, 1 << 20, 2), Scenario("none", 10240, 1 << 20, 2))
    assert custom.repeats == 1 and custom.modes[-1] == "pass-through-spark"
    assert quick.spark_copy_tasks is None  # kmirror run's default
    assert settings_from(parse("--spark", "--spark-copy-tasks", "1")).spark_copy_tasks == 1


def test_full_preset_crosses_batch_sizes_at_1_kib_and_the_other_record_sizes_at_16_kib():
    full = settings_from(parse())
    assert len(full.scenarios) == 5 * (3 + 2) and full.total_bytes == 64 * 10**6
    assert {s.codec for s in full.scenarios} == {"none", "gzip", "snappy", "lz4", "zstd"}
    assert {s.partitions for s in full.scenarios} == {4}
    assert {(s.record_bytes, s.batch_bytes // 1024) for s in full.scenarios} == {
        (1024, 16), (1024, 128), (1024, 1024), (100, 16), (10240, 16)}
    assert [(s.record_bytes, s.batch_bytes // 1024) for s in full.scenarios[:5]] == [
        (100, 16), (1024, 16), (1024, 128), (1024, 1024), (10240, 16)]  # by codec, then sizes
    # A list given on the command line replaces that dimension in every grid; scenarios come once.
    assert len(settings_from(parse("--batch-kib", "16")).scenarios) == 5 * 3
    assert settings_from(parse("--codecs", "zstd", "--record-sizes", "1024")).scenarios == tuple(
        Scenario("zstd", 1024, kib * 1024, 4) for kib in (16, 128, 1024))


def test_settings_travel_as_json_parameters():
    parameters = settings_from(parse("--quick")).parameters()
    assert json.loads(json.dumps(parameters))["scenarios"][0] == {
        "codec": "lz4", "record_bytes": 1024, "batch_bytes": 16384, "partitions": 4}


@pytest.mark.parametrize("argv, message", [
    (("--codecs", "brotli"), "unknown codec brotli"),
    (("--modes", "raw,fastest"), "unknown mode fastest"),
    (("--record-sizes", "1k"), "--record-sizes wants comma-separated byte counts"),
    (("--batch-kib", "16,big"), "--batch-kib wants comma-separated KiB counts"),
    (("--batch-kib", "0"), "positive"),
    (("--batch-kib", "2048"), "max.message.bytes"),
    (("--partitions", "0"), "partitions"),
    (("--keyed-ratio", "0"), "keyed_ratio"),
    (("--repeats", "0"), "at least 1"),
    (("--spark-copy-tasks", "0"), "--spark-copy-tasks must be at least 1"),
    (("--source", "h:1"), "go together"),
])
def test_bad_settings_are_refused_with_a_reason(argv, message):
    with pytest.raises(BenchError, match=message):
        settings_from(parse(*argv))


def test_parse_stat_handles_names_with_spaces_and_parentheses():
    line = "42 (a (weird) name) S 7 42 42 0 -1 4194560 1 0 0 0 150 50 25 25 20 0 1 0 100 0 0"
    ppid, cpu = parse_stat(line)
    assert ppid == 7 and cpu == pytest.approx(200 / 100, rel=0.5)  # own time only; clock ticks: 100 on Linux


def test_tree_pids_follows_parents():
    parents = {1: 0, 10: 1, 11: 10, 12: 10, 20: 1, 30: 99}
    assert tree_pids(parents, 10) == {10, 11, 12}
    assert tree_pids(parents, 30) == {30}


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc")
def test_tree_meter_counts_a_child_that_burns_cpu():
    # The child stays alive a second after its burn, so that a sampler slowed by a loaded machine
    # still sees it once it burned; the kernel's own count of it (getrusage of the waited-for
    # children) is the verdict, not a share of the tree, which holds whatever else this pytest
    # worker runs (a Spark session's JVM, its threads).
    burn = "sum(i * i for i in range(3_000_000)); import time; time.sleep(1)"
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    with TreeMeter(interval_s=0.05) as meter:
        subprocess.run([sys.executable, "-c", burn], check=True)
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    burned = (after.ru_utime + after.ru_stime) - (before.ru_utime + before.ru_stime)
    assert meter.cpu_s > 0 and meter.peak_rss_bytes > 0
    # The CPU split by command line: the child's burn under its own, as much as the kernel counted.
    seen = meter.cpu_by_command.get(f"{sys.executable} -c {burn}", 0)
    assert seen == pytest.approx(burned, abs=0.05)  # /proc/<pid>/stat counts in 10 ms ticks
    assert sum(meter.cpu_by_command.values()) == pytest.approx(meter.cpu_s)


def test_a_mirrors_processes_are_told_apart_by_their_command_lines():
    from mirror.bench.latency_bench import process_role

    python = "/work/.venv/bin/python"
    assert process_role(f"{python} -m mirror.cli run --source a:9092 --destination b:9092") == "driver"
    assert process_role("/usr/lib/jvm/java-17/bin/java -cp /x/jars/* -Xmx1g org.apache.spark.deploy.SparkSubmit "
                        "--conf spark.master=local[2] pyspark-shell") == "spark jvm"
    assert process_role(f"{python} -m pyspark.daemon") == "spark python workers"
    assert process_role(f"{python} -m mirror.engine.copier /tmp/copier-0.sock") == "copiers"
    assert process_role("/usr/lib/jvm/java-17/bin/java -Xmx1g -cp /k/libs/* "
                        "org.apache.kafka.connect.mirror.MirrorMaker /w/mm2.properties") == "mirrormaker2 jvm"
    assert process_role(f"{python} -c from multiprocessing.spawn import spawn_main") == "other"


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc")
def test_tree_meter_never_loses_cpu_when_a_daemon_leaves_the_tree(tmp_path):
    """A grandchild that burned CPU before the window, whose parent exits in the window (so
    init re-parents it, out of the tree) and which then ends: as Spark's workers and kmirror's
    copiers end. Tree totals at both ends would subtract its whole CPU time (negative)."""
    burned, go = tmp_path / "burned", tmp_path / "go"
    grandchild = (f"import pathlib, time; sum(i * i for i in range(4_000_000)); pathlib.Path({str(burned)!r}).touch(); "
                  "time.sleep(1.0)")
    child = subprocess.Popen([sys.executable, "-c", "import os, pathlib, subprocess, sys, time; "
                              f"subprocess.Popen([sys.executable, '-c', {grandchild!r}]); "
                              f"[time.sleep(0.01) for _ in iter(lambda: pathlib.Path({str(go)!r}).exists(), True)]; "
                              "os._exit(0)"])
    deadline = time.monotonic() + 60
    while not burned.exists():  # the grandchild's burn is done, before the window
        assert time.monotonic() < deadline
        time.sleep(0.01)
    # Rooted at the child, as the bench roots it at a mirror's process: this test's own
    # process has other children (a worker's Spark JVM) that keep running meanwhile.
    with TreeMeter(child.pid, interval_s=0.05) as meter:
        go.touch()
        child.wait()
        time.sleep(1.5)  # the grandchild ends, re-parented
    assert 0 <= meter.cpu_s < 0.3


def test_measure_reports_cpu_and_rss_of_this_process():
    sample = measure(lambda: {"passed-through": sum(i for i in range(200_000)) and 1})
    # The peak read at the end of the copy; the process may grow a little after (then the later read is higher).
    assert sample.cpu_s > 0 and 0 < sample.peak_rss_bytes <= peak_rss_bytes()
    assert sample.routes == {"passed-through": 1} and sample.profile == ""
    assert "function calls" in measure(lambda: {}, profile=True).profile


def test_plot_draws_a_png(tmp_path):
    pytest.importorskip("matplotlib")
    from mirror.bench.report import plot

    scenarios = [Scenario(codec, 1024, kib * 1024, 4) for codec in ("lz4", "zstd") for kib in (16, 128, 1024)]
    scenarios += [Scenario(codec, size, 16 * 1024, 4) for codec in ("lz4", "zstd") for size in (100, 10240)]
    results = [ModeResult(mode, scenario, 10, 2, 10**6, 10**5, 0.1, 0.1, 10**6, 1)
               for mode in ("raw", "pass-through") for scenario in scenarios]
    plot(results, tmp_path / "p.png")  # five panels, one per record size and batch size, in two rows
    assert (tmp_path / "p.png").read_bytes().startswith(b"\x89PNG")
