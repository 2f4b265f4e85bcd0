"""Medians, units, ratios against issue 5's targets, the JSON shape, and the tables built on them."""

from __future__ import annotations

import json

import pytest

from mirror.bench.report import ratios_table, results_table, size_label
from mirror.bench.stats import ModeResult, Sample, machine_info, ratios, summarise, to_json
from mirror.bench.timing import interleaved, rounds


def result(mode: str, wall_s: float, cpu_s: float, codec: str = "zstd", record_bytes: int = 1024) -> ModeResult:
    return ModeResult(mode, codec, record_bytes, records=1000, payload_bytes=2 * 10**9, wire_bytes=10**9,
                      wall_s=wall_s, cpu_s=cpu_s, peak_rss_bytes=50 * 10**6, repeats=3)


def test_summarise_takes_each_measure_median_separately():
    samples = [Sample(3.0, 1.0, 100), Sample(1.0, 9.0, 300), Sample(2.0, 2.0, 200)]
    r = summarise("raw", "lz4", 100, 10, 1000, 500, samples)
    assert (r.wall_s, r.cpu_s, r.peak_rss_bytes, r.repeats) == (2.0, 2.0, 200, 3)
    with pytest.raises(ValueError):
        summarise("raw", "lz4", 100, 10, 1000, 500, [])


def test_units_are_decimal_and_per_byte_of_record_data():
    r = result("raw", wall_s=4.0, cpu_s=3.0)  # 2 GB of data, 1 GB on the wire
    assert r.mb_per_s == 500.0 and r.wire_mb_per_s == 250.0
    assert r.records_per_s == 250.0
    assert r.cpu_s_per_gb == 1.5
    assert r.peak_rss_mb == 50.0


def test_ratios_compare_pass_through_with_every_other_mode_against_its_target():
    results = [result("pass-through", 1.0, 1.0), result("raw", 0.95, 0.9), result("recompress", 8.0, 8.0),
               result("confluent-kafka", 4.0, 6.0), result("kafka-python", 20.0, 30.0),
               result("raw", 1.0, 1.0, codec="gzip")]  # no pass-through in this scenario: skipped
    by_mode = {r.versus: r for r in ratios(results)}
    assert set(by_mode) == {"raw", "recompress", "confluent-kafka", "kafka-python"}
    assert by_mode["raw"].throughput == pytest.approx(0.95) and by_mode["raw"].met  # >= 0.9x
    assert by_mode["recompress"].throughput == 8.0 and by_mode["recompress"].met is False  # zstd wants 10x
    # 4x the MB/s but only 6x less CPU... wants >= 3x and <= 1/5: met; a CPU ratio of 4 would not be.
    assert by_mode["confluent-kafka"].cpu == 6.0 and by_mode["confluent-kafka"].met
    assert by_mode["kafka-python"].target is None and by_mode["kafka-python"].met is None


def test_ratios_are_medians_of_round_by_round_ratios():
    def mode(name: str, payload: int, runs: list[tuple[float, float]]) -> ModeResult:
        return summarise(name, "zstd", 1024, 10, payload, 10**8, [Sample(wall, cpu, 1) for wall, cpu in runs])

    base = mode("pass-through", 10**9, [(1.0, 1.0), (2.0, 2.0), (5.0, 5.0)])  # medians: 2 s
    # Each round, raw took 1.1x as long; its median (2.2 s) comes from the same round as base's.
    assert ratios([base, mode("raw", 10**9, [(1.1, 1.0), (2.2, 2.0), (5.5, 5.0)])])[0].throughput == pytest.approx(1.1)
    # One hiccup in raw's first run: round by round 3x, 1.1x, 1.1x gives 1.1; the medians (3 s / 2 s) would say 1.5.
    hiccup = ratios([base, mode("raw", 10**9, [(3.0, 1.0), (2.2, 2.0), (5.5, 5.0)])])[0]
    assert hiccup.throughput == pytest.approx(1.1)
    # Twice the data in twice the time is the same MB/s; 3x the CPU for twice the data is 1.5x per GB.
    (skewed,) = ratios([base, mode("raw", 2 * 10**9, [(2.0, 3.0), (4.0, 6.0), (10.0, 15.0)])])
    assert skewed.throughput == 1.0 and skewed.cpu == 1.5


def test_confluent_target_needs_both_speed_and_cpu():
    slow_cpu = ratios([result("pass-through", 1.0, 1.0), result("confluent-kafka", 4.0, 4.0)])[0]
    assert slow_cpu.throughput == 4.0 and slow_cpu.cpu == 4.0 and slow_cpu.met is False


def test_lz4_recompress_target_is_3x_and_snappy_has_none():
    lz4 = ratios([result("pass-through", 1.0, 1.0, codec="lz4"), result("recompress", 3.5, 3.0, codec="lz4")])[0]
    snappy = ratios([result("pass-through", 1.0, 1.0, codec="snappy"), result("recompress", 3.5, 3.0, codec="snappy")])[0]
    assert lz4.met is True and snappy.met is None


def test_json_has_the_issue_minimum_shape_and_round_trips():
    results = [result("pass-through", 1.0, 1.0), result("confluent-kafka", 4.0, 6.0)]
    document = json.loads(json.dumps(to_json(results, {"repeats": 3}, machine_info())))
    assert set(document) >= {"results", "machine", "ratios", "parameters"}
    for row in document["results"]:
        assert set(row) >= {"mode", "codec", "record_bytes", "mb_per_s", "records_per_s", "cpu_s_per_gb", "peak_rss_mb"}
        assert row["mode"] in {"raw", "pass-through", "inspect", "recompress", "confluent-kafka", "kafka-python",
                               "pass-through-spark"}
    assert document["results"][0]["mb_per_s"] == 2000.0
    assert document["ratios"][0]["versus"] == "confluent-kafka" and document["ratios"][0]["met"] is True
    assert document["machine"]["cpus"] >= 1 and document["machine"]["python"]


def test_tables_show_every_result_and_the_verdicts():
    results = [result("pass-through", 1.0, 1.0), result("recompress", 8.0, 8.0)]
    table = results_table(results)
    assert len(table.splitlines()) == 3 and "pass-through" in table and "2000.0" in table
    ratio_lines = ratios_table(ratios(results)).splitlines()
    assert "8.00x" in ratio_lines[1] and "MISSES" in ratio_lines[1] and ">= 10x" in ratio_lines[1]


@pytest.mark.parametrize("size, label", [(100, "100 B"), (1024, "1 KiB"), (10240, "10 KiB"), (1500, "1500 B")])
def test_size_labels(size, label):
    assert size_label(size) == label


def test_rounds_interleave_modes_and_interleaved_keeps_working():
    calls = []
    order = [(r, m) for r, m, _ in rounds({"a": lambda: calls.append("a"), "b": lambda: calls.append("b")}, 3)]
    assert calls == ["a", "b"] * 3
    assert order == [(0, "a"), (0, "b"), (1, "a"), (1, "b"), (2, "a"), (2, "b")]
    rotated = [m for _, m, _ in rounds({"a": lambda: 1, "b": lambda: 2, "c": lambda: 3}, 4, rotate=True)]
    assert rotated == ["a", "b", "c", "b", "c", "a", "c", "a", "b", "a", "b", "c"]
    timings = interleaved({"x": lambda: None}, 2)
    assert timings["x"].repeats == 2 and timings["x"].wall_s >= 0
