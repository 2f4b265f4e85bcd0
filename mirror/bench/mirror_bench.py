"""``kmirror bench mirror``: copy the same data every way, side by side, and compare.

Every mode copies the same generated source topic (one per scenario: codec, record size and
source batch size) from a source broker to a fresh topic on a destination broker. The
brokers are separate processes, and each run of each mode is a process of its own, so the
CPU seconds and peak RSS reported are the mirror's alone. Modes run interleaved, each round
starting one mode later (A B C, B C A, ...), and each measure's median over --repeats rounds
is reported.

modes:
  raw                 the I/O ceiling: the engine's pipeline, every batch forwarded unchecked
  pass-through        kmirror's copy engine, no-keys-flag data, partitioning preserve (at-least-once)
  exactly-once        pass-through in one destination transaction with its source offsets, as a
                      task of an exactly-once job copies a micro-batch (--delivery)
  inspect             the engine on unkeyed data without the flag (as librdkafka writes it), by-key:
                      decompress to check the keys, forward the original bytes
  recompress          the engine on keyed data into another partition count: every batch rebuilt
                      (left out where batches hold too few records for their keys to split them)
  coalesced           the engine as kmirror run copies by default, on unflagged data (as Java's
                      producer writes it), preserve: batches under coalesce_below_bytes (4 KiB) merged
                      into batches of up to 64 KiB, bigger ones forwarded (pass-through forwards all)
  confluent-kafka     a Consumer -> Producer loop with the same codec (librdkafka)
  kafka-python        a KafkaConsumer -> KafkaProducer loop with the same codec
  pass-through-spark  (--spark) the pass-through copy through `kmirror run --once` on local[2],
                      in a JVM that first ran a warm-up query of about 16 micro-batches
  mirrormaker2        (--cluster kafka) Apache Kafka's MirrorMaker 2 in dedicated mode, as shipped:
                      IdentityReplicationPolicy, a task per partition, heartbeats and checkpoints
                      off (mirror/bench/mirrormaker.py); timed from the first record copied
  mirrormaker2-eos    the same with exactly-once source support (KIP-618)
  kmirror-run         the long-running `kmirror run` job, at-least-once, its defaults, on unflagged
                      data (as Java's producer writes it), timed the same way; its start-up to the
                      last record is reported beside (mirror/bench/kmirror_run.py)
  kmirror-run-eos     the same, exactly-once (the job's default delivery)

--cluster kafka runs every mode between two real Apache Kafka brokers (KRaft, one node each,
1 GiB heaps), fetched by Maven and started by the bench; embedded (the default) needs neither.
--source-rtt-ms N puts the source behind a TCP proxy that delays each direction by N/2 ms, and
the source advertises the proxy's address: every mode then reads across a WAN of that RTT.

Source batches are filled to --batch-kib as stored, as the Java producer fills batch.size
(see mirror/bench/datagen.py); the results show the mean stored batch as built. Per-batch
costs decide how close pass-through gets to the loops, so batch size is a dimension:

  --quick  lz4,zstd x 1 KiB records x 16,128 KiB batches, 32 MB, 3 rounds: the issue's target
           scenario (16 KiB) beside the old default (128 KiB); about 3 minutes on 2 cores.
  full     none,gzip,snappy,lz4,zstd x 1 KiB records x 16,128,1024 KiB batches (the Java
           producer's default, a tuned producer, the broker's max.message.bytes), plus 100 B
           and 10 KiB records at 16 KiB only, 64 MB, 3 rounds: 25 scenarios, where crossing
           record sizes with every batch size would be 45 for little more to learn (record size
           shifts the per-record cost of the loops, batch size the per-batch cost of ours).
           About half an hour on 2 cores (25 minutes for the run in docs/performance.md).
  --small-batches  lz4,zstd x 1 KiB records x 1,2,4,8,16 KiB batches, 64 MB, 3 rounds, modes
           pass-through, coalesced and the two loops: where producers write little at a time
           (issue 40's table).

--codecs, --record-sizes and --batch-kib replace that dimension in each grid of the preset.
Source topics have --partitions (4) partitions.

MB/s and CPU s/GB count record data (keys and values, uncompressed; MB = 10^6 bytes); wire
MB/s counts the source batches as stored, batches/s the source batches. The targets table
holds pass-through to the issue's targets, set for 16 KiB batches of 1 KiB lz4 and zstd
records on 4 partitions: >= 0.9x raw's MB/s, >= 2x confluent-kafka's, <= 1/5 of its CPU s/GB.
See docs/performance.md for a full run.
"""

from __future__ import annotations

import argparse
import contextlib
import importlib.util
import itertools
import json
import os
import subprocess
import sys
import tempfile
import time
from dataclasses import asdict, dataclass, replace
from pathlib import Path
from typing import Iterator, Sequence

import kcodecs
from kcodecs import Compression, KMirrorError

from ..broker import BrokerProcess
from ..config import FETCH_MAX_BYTES
from ..kafka import READ_COMMITTED, KafkaClient, NewTopic, TopicPartition
from ..routing import ReadCommitted
from .datagen import DataSpec, Dataset, Layout, build_dataset
from . import kmirror_run, mirrormaker
from .fill import fill_topic
from .latency_proxy import LatencyProxy, free_port
from .mode_run import ModeRun
from .report import (peer_table, plot, ratios_table, results_table, run_copy_table, scenario_label,
                     small_batch_table)
from .stats import (ModeResult, Sample, Scenario, machine_info, peer_ratios, ratios, run_copy_ratios,
                    small_batch_ratios, summarise, to_json)
from .timing import rounds

__all__ = ["MODES", "SMALL_BATCH_MODES", "MIRRORMAKER_MODES", "RUN_MODES", "LAYOUT_OF_MODE", "FULL", "QUICK", "SMALL",
           "BenchError", "Grid", "Preset", "Settings", "settings_from", "scenarios", "bench", "run_worker", "check_copy",
           "count_data_records", "add_arguments", "run"]

MODES = ("raw", "pass-through", "exactly-once", "inspect", "recompress", "coalesced", "confluent-kafka", "kafka-python")
MIRRORMAKER_MODES = ("mirrormaker2", "mirrormaker2-eos")
"""Only against real Kafka (``--cluster kafka``, or ``--source``/``--destination``)."""
RUN_MODES = ("kmirror-run", "kmirror-run-eos")
"""The real job, as a process of its own: the peer of the MirrorMaker 2 modes."""
TRANSACTIONAL_PROCESS_MODES = ("mirrormaker2-eos", "kmirror-run-eos")
"""A transaction per commit: markers no one can count ahead, so the copy is counted from the batches."""
SMALL_BATCH_MODES = ("pass-through", "coalesced", "confluent-kafka", "kafka-python")
DELIVERY_MODES = {"at-least-once": "pass-through", "exactly-once": "exactly-once"}
"""``--delivery``: the pass-through copy at each guarantee."""
SPARK_MODE = "pass-through-spark"
LAYOUT_OF_MODE = {
    "raw": Layout.FLAGGED, "pass-through": Layout.FLAGGED, "exactly-once": Layout.FLAGGED, "inspect": Layout.UNFLAGGED,
    "recompress": Layout.KEYED, "coalesced": Layout.UNFLAGGED,
    "confluent-kafka": Layout.FLAGGED, "kafka-python": Layout.FLAGGED, SPARK_MODE: Layout.FLAGGED,
    "mirrormaker2": Layout.UNFLAGGED, "mirrormaker2-eos": Layout.UNFLAGGED,
    "kmirror-run": Layout.UNFLAGGED, "kmirror-run-eos": Layout.UNFLAGGED,
}
ROUTE_OF_MODE = {"pass-through": "passed-through", "exactly-once": "passed-through", "inspect": "inspected",
                 "recompress": "rebuilt", "coalesced": "coalesced",
                 SPARK_MODE: "passed-through"}
"""The routing class an engine mode is named for, which its records must take, or the mode
measured something else. In recompress, a batch whose keys all route to one partition goes
whole (inspected), so only the records the data set counts as split must be rebuilt."""
MIN_REBUILT_SHARE = 0.9
"""recompress runs only where the engine must rebuild at least this share of the keyed records.
Small batches of big records (10 KiB records fill 16 KiB batches with one without a codec,
two with lz4 or snappy) often route whole to one partition: recompress would measure inspect."""
MIN_COALESCED_SHARE = 0.9
"""coalesced must merge at least this share of the records in batches under the threshold: a
small batch alone in its fetch, or between two big ones, goes as it is."""
_NEEDS = {"confluent-kafka": "confluent_kafka", "kafka-python": "kafka", SPARK_MODE: "pyspark",
          "mirrormaker2": "confluent_kafka", "mirrormaker2-eos": "confluent_kafka",
          "kmirror-run": "pyspark", "kmirror-run-eos": "pyspark"}
_MB = 10**6
_WORKER_TIMEOUT_S = 3600

KAFKA_HEAP_MB = 1024
"""Each real Kafka broker's fixed heap under ``--cluster kafka`` (Kafka's scripts default to 1 GiB)."""

MAX_BATCH_KIB = 1024
"""Brokers refuse a batch over ``max.message.bytes``: 1 MiB + 12 bytes by default, ours included."""


@dataclass(frozen=True)
class Grid:
    """Every combination of these codecs, record sizes (bytes) and source batch sizes (KiB), each
    a comma-separated list as on the command line."""

    codecs: str
    record_sizes: str
    batch_kib: str

    def describe(self) -> str:
        return f"{self.codecs} x {self.record_sizes} B records x {self.batch_kib} KiB batches"


@dataclass(frozen=True)
class Preset:
    """The scenarios (the union of the grids) and the amount of data a run measures by default."""

    grids: tuple[Grid, ...]
    total_mb: float
    repeats: int

    def describe(self) -> str:
        return " + ".join(grid.describe() for grid in self.grids) + f"; {self.total_mb:g} MB, {self.repeats} rounds"


_ALL_CODECS = "none,gzip,snappy,lz4,zstd"
FULL = Preset((Grid(_ALL_CODECS, "1024", "16,128,1024"), Grid(_ALL_CODECS, "100,10240", "16")), total_mb=64, repeats=3)
QUICK = Preset((Grid("lz4,zstd", "1024", "16,128"),), total_mb=32, repeats=3)
SMALL = Preset((Grid("lz4,zstd", "1024", "1,2,4,8,16"),), total_mb=64, repeats=3)


class BenchError(KMirrorError):
    """The bench could not measure: a worker failed, or a copy is incomplete or took the wrong route."""


@dataclass(frozen=True)
class Settings:
    """The parsed command line."""

    scenarios: tuple[Scenario, ...]
    total_bytes: int
    keyed_ratio: float
    repeats: int
    modes: tuple[str, ...]
    seed: int
    fetch_max_bytes: int
    source: str | None
    destination: str | None
    profile: bool
    spark_copy_tasks: int | None = None
    cluster: str = "embedded"
    source_rtt_ms: float = 0.0
    """The source's round trip through the bench's latency proxy (0: no proxy)."""
    keep_dir: Path | None = None
    """Where the mirror processes' configurations are kept: beside ``--json``'s file."""

    def data_spec(self, scenario: Scenario) -> DataSpec:
        return DataSpec(Compression.parse(scenario.codec), scenario.record_bytes, self.total_bytes, scenario.batch_bytes,
                        self.keyed_ratio, scenario.partitions, self.seed)

    def parameters(self) -> dict:
        return {**asdict(self), "keep_dir": None if self.keep_dir is None else str(self.keep_dir)}


def settings_from(args: argparse.Namespace) -> Settings:
    if args.quick and args.small_batches:
        raise BenchError("--quick and --small-batches are two presets: choose one")
    preset = QUICK if args.quick else SMALL if args.small_batches else FULL
    default_modes = SMALL_BATCH_MODES if args.small_batches else MODES
    modes = tuple(pick_list(args.modes or ",".join(default_modes), MODES + (SPARK_MODE,) + MIRRORMAKER_MODES + RUN_MODES,
                            "mode"))
    if args.delivery is not None:
        wanted = {DELIVERY_MODES[d] for d in pick_list(args.delivery, tuple(DELIVERY_MODES), "delivery")}
        modes = tuple(m for m in modes if m not in DELIVERY_MODES.values() or m in wanted)
        modes += tuple(m for m in DELIVERY_MODES.values() if m in wanted and m not in modes)
    if args.spark and SPARK_MODE not in modes:
        modes += (SPARK_MODE,)
    if (args.source is None) != (args.destination is None):
        raise BenchError("--source and --destination go together")
    if args.source_rtt_ms < 0:
        raise BenchError(f"--source-rtt-ms must not be negative, not {args.source_rtt_ms:g}")
    if args.source_rtt_ms and args.source is not None:
        raise BenchError("--source-rtt-ms puts the bench's own source broker behind a proxy: leave out --source")
    if args.cluster == "kafka" and args.source is not None:
        raise BenchError("--cluster kafka starts its own brokers: leave out --source and --destination")
    if any(mode in MIRRORMAKER_MODES for mode in modes) and args.cluster != "kafka" and args.source is None:
        raise BenchError("the mirrormaker2 modes run against real Kafka: add --cluster kafka")
    settings = Settings(
        scenarios=scenarios(preset, args),
        total_bytes=int((preset.total_mb if args.total_mb is None else args.total_mb) * _MB),
        keyed_ratio=args.keyed_ratio, repeats=preset.repeats if args.repeats is None else args.repeats, modes=modes,
        seed=args.seed, fetch_max_bytes=args.fetch_max_bytes, source=args.source, destination=args.destination,
        profile=args.profile, spark_copy_tasks=args.spark_copy_tasks, cluster=args.cluster,
        source_rtt_ms=args.source_rtt_ms,
        keep_dir=None if getattr(args, "json", None) is None
        else args.json.with_name(args.json.stem + "-configurations"),
    )
    if settings.repeats < 1:
        raise BenchError(f"--repeats must be at least 1, not {settings.repeats}")
    if settings.spark_copy_tasks is not None and settings.spark_copy_tasks < 1:
        raise BenchError(f"--spark-copy-tasks must be at least 1, not {settings.spark_copy_tasks}")
    for scenario in settings.scenarios:
        try:
            settings.data_spec(scenario)
        except ValueError as exc:
            raise BenchError(str(exc)) from None
    return settings


def scenarios(preset: Preset, args: argparse.Namespace) -> tuple[Scenario, ...]:
    """The preset's grids, each with the lists given on the command line in place of its own;
    every scenario once, by codec, then record size, then batch size."""
    found: dict[Scenario, None] = {}
    for grid in preset.grids:
        codecs = pick_list(args.codecs or grid.codecs, [c.name.lower() for c in Compression], "codec")
        sizes = _positive_ints(args.record_sizes or grid.record_sizes, "--record-sizes", "byte counts")
        batches = _positive_ints(args.batch_kib or grid.batch_kib, "--batch-kib", "KiB counts")
        if max(batches) > MAX_BATCH_KIB:
            raise BenchError(f"--batch-kib goes up to {MAX_BATCH_KIB}: brokers refuse batches over max.message.bytes "
                             f"(1 MiB + 12 by default), not {max(batches)}")
        for codec, size, kib in itertools.product(codecs, sizes, batches):
            found[Scenario(codec, size, kib * 1024, args.partitions)] = None
    codecs = list(dict.fromkeys(scenario.codec for scenario in found))
    return tuple(sorted(found, key=lambda s: (codecs.index(s.codec), s.record_bytes, s.batch_bytes)))


def _positive_ints(text: str, option: str, what: str) -> tuple[int, ...]:
    try:
        numbers = tuple(int(number) for number in text.split(","))
    except ValueError:
        raise BenchError(f"{option} wants comma-separated {what}, not {text!r}") from None
    if min(numbers) < 1:
        raise BenchError(f"{option} wants positive {what}, not {text!r}")
    return numbers


def pick_list(text: str, allowed: Sequence[str], what: str) -> list[str]:
    chosen = [item.strip() for item in text.split(",") if item.strip()]
    unknown = [item for item in chosen if item not in allowed]
    if unknown or not chosen:
        raise BenchError(f"unknown {what} {', '.join(unknown) or '(none given)'}; choose from {', '.join(allowed)}")
    return chosen


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--quick", action="store_true",
                        help=f"a subset: {QUICK.describe()} (about 3 minutes on 2 cores)")
    parser.add_argument("--small-batches", action="store_true",
                        help=f"small source batches: {SMALL.describe()}, modes {','.join(SMALL_BATCH_MODES)}")
    parser.add_argument("--codecs", help="comma-separated; replaces the preset's in each of its grids")
    parser.add_argument("--record-sizes", help="value bytes per record, comma-separated; replaces the preset's")
    parser.add_argument("--batch-kib", help=f"stored size of a source batch (the producer's batch.size), KiB, "
                                            f"comma-separated, at most {MAX_BATCH_KIB}; replaces the preset's")
    parser.add_argument("--total-mb", type=float, help=f"record data per source topic, in MB (default {FULL.total_mb:g})")
    parser.add_argument("--repeats", type=int, help=f"interleaved rounds; medians are reported (default {FULL.repeats})")
    parser.add_argument("--modes", help=f"comma-separated subset of {','.join(MODES)},{SPARK_MODE},"
                                        f"{','.join(MIRRORMAKER_MODES + RUN_MODES)} (default: all but the Spark, "
                                        f"MirrorMaker 2 and kmirror run ones)")
    parser.add_argument("--delivery", help="comma-separated exactly-once,at-least-once: the pass-through copy at "
                                           "these guarantees, side by side (default: both)")
    parser.add_argument("--spark", action="store_true", help=f"also run {SPARK_MODE}: the Spark job's micro-batch overhead")
    parser.add_argument("--spark-copy-tasks", type=int, metavar="N",
                        help=f"{SPARK_MODE}'s copy_tasks (default: kmirror run's, the executor slots: 2 on its "
                             "local[2]); 1 copies in the shape of the pass-through mode, one task for all partitions")
    parser.add_argument("--keyed-ratio", type=float, default=1.0,
                        help="share of keyed records in the recompress mode's topic (default 1.0)")
    parser.add_argument("--partitions", type=int, default=4, help="source partitions (default 4; recompress copies into one more)")
    parser.add_argument("--seed", type=int, default=42, help="data generator seed (default 42)")
    parser.add_argument("--fetch-max-bytes", type=int, default=FETCH_MAX_BYTES, help="bytes per fetch (default 4 MiB, as kmirror run's)")
    parser.add_argument("--cluster", choices=("embedded", "kafka"), default="embedded",
                        help="the brokers each scenario starts: embedded (kmirror's, the default) or kafka (Apache "
                             "Kafka 4.4.0, KRaft, one node each, fetched by Maven once; needs Java and Maven)")
    parser.add_argument("--source-rtt-ms", type=float, default=0.0, metavar="MS",
                        help="put the source behind a latency-injecting TCP proxy with this round trip (a WAN); the "
                             "source advertises the proxy, so every connection to it crosses (default 0: none)")
    parser.add_argument("--source", metavar="HOST:PORT", help="use this cluster as the source instead of an embedded broker")
    parser.add_argument("--destination", metavar="HOST:PORT", help="use this cluster as the destination (topics are left behind)")
    parser.add_argument("--json", metavar="FILE", type=Path, help="write the results as JSON")
    parser.add_argument("--plot", metavar="FILE.png", type=Path,
                        help="draw MB/s by mode and codec, a panel per record and batch size (needs matplotlib)")
    parser.add_argument("--profile", action="store_true",
                        help="after each scenario, one extra pass-through run under cProfile (not counted), printed")


def run(args: argparse.Namespace) -> int:
    try:
        settings = settings_from(args)
        _check_libraries(settings.modes, args.plot)
        results = bench(settings)
    except BenchError as exc:
        print(f"kmirror bench mirror: {exc}", file=sys.stderr)
        return 1
    print("\nResults (medians of %d rounds)\n%s\n\nPass-through against the targets (medians of round-by-round ratios)\n%s"
          % (settings.repeats, results_table(results), ratios_table(ratios(results))), flush=True)
    if run_copy_ratios(results):
        count = settings.spark_copy_tasks
        tasks = "the default copy tasks" if count is None else f"{count} copy task{'s' if count > 1 else ''}"
        print(f"\nkmirror run ({SPARK_MODE}, {tasks}) against pass-through, {settings.scenarios[0].partitions} source "
              f"partitions (medians of round-by-round ratios)\n{run_copy_table(run_copy_ratios(results))}", flush=True)
    if small_batch_ratios(results):
        print(f"\nThe coalesced copy against the confluent-kafka loop and pass-through (medians of round-by-round "
              f"ratios)\n{small_batch_table(small_batch_ratios(results))}", flush=True)
    if peer_ratios(results):
        print(f"\nkmirror run against MirrorMaker 2 (medians of round-by-round ratios)\n"
              f"{peer_table(peer_ratios(results))}", flush=True)
    if args.json:
        args.json.write_text(json.dumps(to_json(results, settings.parameters() | {"command": sys.argv},
                                                machine_info()), indent=2) + "\n")
        print(f"wrote {args.json}")
    if args.plot:
        plot(results, args.plot)
        print(f"wrote {args.plot}")
    return 0


def _check_libraries(modes: Sequence[str], plot_to: Path | None) -> None:
    missing = [f"{mode} needs {module}" for mode, module in _NEEDS.items()
               if mode in modes and importlib.util.find_spec(module) is None]
    if plot_to is not None and importlib.util.find_spec("matplotlib") is None:
        missing.append("--plot needs matplotlib")
    if missing:
        raise BenchError("; ".join(missing) + ": pip install 'kmirror[bench]'")


def bench(settings: Settings) -> list[ModeResult]:
    """Every scenario in turn; returns every mode's medians."""
    results: list[ModeResult] = []
    run_id = time.strftime("%H%M%S")
    print(f"kmirror bench mirror: {len(settings.scenarios)} scenarios x {len(settings.modes)} modes x "
          f"{settings.repeats} rounds, {settings.total_bytes / _MB:g} MB each over "
          f"{settings.scenarios[0].partitions} source partitions", flush=True)
    with tempfile.TemporaryDirectory(prefix="kmirror-bench-") as tmp:
        for scenario in settings.scenarios:
            name = f"{scenario.codec}-{scenario.record_bytes}-{scenario.batch_bytes // 1024}k"
            results += _scenario(settings, scenario, Path(tmp) / name, f"bench{run_id}-{name}")
    return results


def _scenario(settings: Settings, scenario: Scenario, work: Path, prefix: str) -> list[ModeResult]:
    # Stamped now, as a producer's records are: year-old data would fall to the destination's
    # retention at the first commit marker (DataSpec.base_timestamp_ms).
    spec = replace(settings.data_spec(scenario), base_timestamp_ms=time.time_ns() // 1_000_000)
    label = scenario_label(scenario)
    with _clusters(settings, work) as (source, destination):
        datasets = _fill(source, spec, prefix, label, {Layout.FLAGGED} | {LAYOUT_OF_MODE[m] for m in settings.modes})
        modes = _measurable(settings.modes, spec, datasets, label)
        runs = {mode: _runner(settings, source, destination, spec, datasets[LAYOUT_OF_MODE[mode]], prefix, mode, work)
                for mode in modes}
        # The first copy into a fresh broker runs up to 2x slower than the next (measured): warm both up.
        _runner(settings, source, destination, spec, datasets[Layout.FLAGGED], prefix, "raw", work, "warm-up")()
        samples: dict[str, list[Sample]] = {mode: [] for mode in modes}
        for round_, mode, sample in rounds(runs, settings.repeats, rotate=True):
            samples[mode].append(sample)
            data = datasets[LAYOUT_OF_MODE[mode]]
            print(f"  [{label}] round {round_ + 1}/{settings.repeats}  {mode:<19}{data.payload_bytes / _MB / sample.wall_s:8.1f} MB/s"
                  f"{len(data.batches) / sample.wall_s:9,.0f} batches/s{sample.cpu_s:8.3f} s CPU"
                  f"{sample.peak_rss_bytes / _MB:6.0f} MB RSS"
                  + (f"; kmirror run's copying {sample.copy_s:.2f} s ({data.payload_bytes / _MB / sample.copy_s:.1f} MB/s)"
                     if sample.copy_s else "")
                  + (f"; {sample.start_s:.1f} s from its start to the last record" if sample.start_s else ""), flush=True)
        if settings.profile:
            print(runs["pass-through"](profile=True).profile if "pass-through" in runs else "", flush=True)
    results = []
    for mode in modes:
        data = datasets[LAYOUT_OF_MODE[mode]]
        results.append(summarise(mode, scenario, data.records, len(data.batches), data.payload_bytes, data.wire_bytes,
                                 samples[mode]))
    print(results_table(results), flush=True)
    return results


def _measurable(modes: Sequence[str], spec: DataSpec, datasets: dict[Layout, Dataset], label: str) -> list[str]:
    """The modes that measure what they are named for on this data; says why another is left out."""
    keyed = datasets.get(Layout.KEYED)
    if keyed is None or keyed.split_records >= MIN_REBUILT_SHARE * keyed.records:
        return list(modes)
    print(f"  [{label}] recompress left out: only {keyed.split_records / keyed.records:.0%} of the keyed records are in "
          f"batches whose keys split over {spec.repartitioned} partitions ({keyed.records / len(keyed.batches):.1f} "
          f"records a batch); the engine forwards the others whole, which is inspect", flush=True)
    return [mode for mode in modes if mode != "recompress"]


@contextlib.contextmanager
def _clusters(settings: Settings, work: Path) -> Iterator[tuple[str, str]]:
    """The user's clusters, or two fresh brokers for one scenario: embedded (child processes), or
    real Kafka (``--cluster kafka``: a JVM each, with a fixed heap). With ``--source-rtt-ms``
    the source stands behind a latency proxy (:mod:`.latency_proxy`) and advertises the proxy's
    address, so that every connection to it, the mirrors' and the fill's, crosses the proxy."""
    if settings.source and settings.destination:
        yield settings.source, settings.destination
        return
    proxy_port = free_port() if settings.source_rtt_ms else None
    advertised = None if proxy_port is None else f"127.0.0.1:{proxy_port}"
    with contextlib.ExitStack() as stack:
        if settings.cluster == "kafka":
            from ..realkafka import KafkaCluster

            source = KafkaCluster(work / "source-kafka", heap_mb=KAFKA_HEAP_MB,
                                  advertised={"PLAINTEXT": advertised} if advertised else {})
            destination = KafkaCluster(work / "destination-kafka", heap_mb=KAFKA_HEAP_MB)
            for cluster in (source, destination):
                stack.callback(cluster.stop)
                cluster.start()
            source_port, addresses = source.node(1).ports["PLAINTEXT"], (source.bootstrap, destination.bootstrap)
        else:
            brokers = [BrokerProcess(work / "source", extra_args=("--advertised-listener", advertised) if advertised
                                     else ()), BrokerProcess(work / "destination")]
            for broker in brokers:
                stack.callback(_stop_broker, broker)
                broker.start()
            source_port, addresses = brokers[0].port, (brokers[0].bootstrap, brokers[1].bootstrap)
        if proxy_port is None:
            yield addresses
            return
        proxy = stack.enter_context(LatencyProxy("127.0.0.1", source_port, settings.source_rtt_ms,
                                                 listen_port=proxy_port))
        yield proxy.address, addresses[1]


def _stop_broker(broker: BrokerProcess) -> None:
    if broker.process is not None and broker.process.poll() is None:
        broker.terminate()


def _fill(source: str, spec: DataSpec, prefix: str, label: str, layouts: set[Layout]) -> dict[Layout, Dataset]:
    """Generate each layout the modes need and produce it to its source topic (not timed; see :mod:`.fill`)."""
    datasets = {}
    with KafkaClient(source) as client:
        for layout in sorted(layouts, key=list(Layout).index):
            began = time.perf_counter()
            data = build_dataset(spec, layout)
            fill_topic(client, f"{prefix}-{layout.value}", spec.partitions, data)
            datasets[layout] = data
            _report_fill(label, layout, data, time.perf_counter() - began)
    return datasets


def _report_fill(label: str, layout: Layout, data: Dataset, seconds: float) -> None:
    print(f"  [{label}] source topic {layout.value}: {data.records:,} records, {data.payload_bytes / _MB:.1f} MB "
          f"of data in {len(data.batches)} batches of {data.mean_batch_bytes / 1024:.1f} KiB stored on average "
          f"({data.records / len(data.batches):.1f} records each), {data.wire_bytes / _MB:.1f} MB on the wire "
          f"({data.payload_bytes / data.wire_bytes:.2f}x), built and produced in {seconds:.1f} s", flush=True)


def _runner(settings: Settings, source: str, destination: str, spec: DataSpec, data: Dataset, prefix: str,
            mode: str, work: Path, name: str | None = None):
    """A callable that runs ``mode`` once more, into a fresh destination topic, and checks the copy."""
    count = iter(range(1, 1 << 30))
    name = name or mode
    destination_partitions = spec.repartitioned if mode == "recompress" else spec.partitions
    must_route = {"recompress": data.split_records, "coalesced": _must_coalesce(data)}.get(mode, data.records)

    def run_once(*, profile: bool = False) -> Sample:
        number = next(count)
        topic = f"{prefix}-{LAYOUT_OF_MODE[mode].value}"
        # MirrorMaker 2 under IdentityReplicationPolicy names the destination topic as the source's.
        identity = mode in MIRRORMAKER_MODES
        run = ModeRun(mode, source, destination, topic, topic if identity else f"{topic}.{name}.{number}",
                      data.end_offsets(spec.partitions), destination_partitions, spec.codec.name.lower(),
                      settings.fetch_max_bytes, str(work / f"{name}-{number}"), profile, settings.spark_copy_tasks)
        if identity:
            _delete_topic(destination, run.destination_topic)
        with KafkaClient(destination) as client:
            client.create_topics([NewTopic(run.destination_topic, destination_partitions)])
            sample = run_worker(run)
            if number == 1:
                _keep_configuration(settings, run)
            partitions = [TopicPartition(run.destination_topic, p) for p in range(destination_partitions)]
            deleted = client.list_offsets(partitions, "earliest")
            if mode in TRANSACTIONAL_PROCESS_MODES:
                copied = count_data_records(client, partitions)
            else:
                # The exactly-once copy is one transaction: its commit marker takes an offset in every
                # partition. So is the Spark mode's: kmirror run's default delivery is exactly-once, and
                # --once with no rate limit copies everything in one micro-batch, one transaction per
                # task and partition.
                markers = destination_partitions if mode in ("exactly-once", SPARK_MODE) else 0
                copied = sum(client.list_offsets(partitions, "latest").values()) - markers
        check_copy(run, sample, copied, must_route, sum(deleted.values()))
        return sample

    return run_once


_CONFIGURATION_FILES = {**dict.fromkeys(MIRRORMAKER_MODES, mirrormaker.CONFIGURATION_FILE),
                        **dict.fromkeys(RUN_MODES, kmirror_run.CONFIGURATION_FILE)}


def _keep_configuration(settings: Settings, run: ModeRun) -> None:
    """A mirror process's configuration as the run wrote it (MirrorMaker 2's properties, the
    ``kmirror run`` command line), printed, and kept beside the ``--json`` results, so anyone
    can check the peer was configured fairly."""
    name = _CONFIGURATION_FILES.get(run.mode)
    if name is None:
        return
    text = (Path(run.work_dir) / name).read_text()
    print(f"  {run.mode} ran with ({name}):\n" + "".join(f"    {line}\n" for line in text.splitlines()), end="",
          flush=True)
    if settings.keep_dir is not None:
        settings.keep_dir.mkdir(parents=True, exist_ok=True)
        (settings.keep_dir / f"{run.source_topic}.{run.mode}.{name.rsplit('.', 1)[1]}").write_text(text)


def _delete_topic(bootstrap: str, topic: str, timeout_s: float = 60.0) -> None:
    """Delete ``topic`` if the cluster has it, and wait until it is gone (Kafka deletes in the
    background), so that a topic of that name can be created empty again."""
    from confluent_kafka.admin import AdminClient

    admin = AdminClient({"bootstrap.servers": bootstrap})
    if topic not in admin.list_topics(timeout=timeout_s).topics:
        return
    admin.delete_topics([topic], operation_timeout=timeout_s)[topic].result(timeout_s)
    deadline = time.monotonic() + timeout_s
    while topic in admin.list_topics(timeout=timeout_s).topics:
        if time.monotonic() > deadline:
            raise BenchError(f"{topic} was not deleted from {bootstrap} within {timeout_s:.0f} s")
        time.sleep(0.2)


def count_data_records(client: KafkaClient, partitions: Sequence[TopicPartition]) -> int:
    """Records of committed data batches in ``partitions``, from the batch headers: transaction
    markers and aborted batches left out, as a read_committed consumer would."""
    total = 0
    for tp in partitions:
        offset = 0
        end = client.list_offsets([tp], "latest")[tp]
        while offset < end:
            fetched = client.fetch(tp, offset, max_bytes=8 << 20, isolation_level=READ_COMMITTED)
            committed = ReadCommitted(fetched.aborted_transactions)
            for batch in kcodecs.iter_batches(fetched.records):
                aborted = committed.is_aborted(batch)  # asked of every batch, in order, as it keeps state
                if batch.last_offset >= offset:
                    if not aborted and not batch.is_control:
                        total += batch.record_count
                    offset = batch.last_offset + 1
            if not fetched.records:
                break  # the last stable offset: nothing more a read_committed reader gets
    return total


def _must_coalesce(data: Dataset) -> int:
    """Records the coalesced mode must merge: most of those in small batches where such batches
    hold most of the data; none where they are only a partition's last batch or two (it then
    measures pass-through, as kmirror run copies such data)."""
    if data.small_records < data.records / 2:
        return 0
    return int(MIN_COALESCED_SHARE * data.small_records)


def run_worker(run: ModeRun) -> Sample:
    """Run one mode in a fresh interpreter (see :mod:`.worker`) and read back its sample."""
    work = Path(run.work_dir)
    work.mkdir(parents=True, exist_ok=True)
    spec_path, result_path = work / "spec.json", work / "result.json"
    spec_path.write_text(run.to_json())
    done = subprocess.run([sys.executable, "-m", "mirror.bench.worker", str(spec_path), str(result_path)],
                          stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=_WORKER_TIMEOUT_S,
                          env=dict(os.environ, PYTHONUNBUFFERED="1"))
    if done.returncode != 0 or not result_path.exists():
        tail = "\n".join((done.stderr or "").strip().splitlines()[-25:])
        raise BenchError(f"{run.mode} worker exited with {done.returncode}:\n{tail}")
    return Sample(**json.loads(result_path.read_text()))


def check_copy(run: ModeRun, sample: Sample, copied: int, must_route: int, deleted: int = 0) -> None:
    """Refuse a sample that did not copy every record, that the destination no longer holds in
    full (``deleted``: offsets below its partitions' log start, gone to retention), or where
    fewer than ``must_route`` records took the route the mode is named for: its time would
    measure something else."""
    if copied != run.records:
        raise BenchError(f"{run.mode}: the destination holds {copied} records, the source {run.records}")
    if deleted:
        raise BenchError(f"{run.mode}: the destination deleted {deleted} of the copied records (retention)")
    route = ROUTE_OF_MODE.get(run.mode)
    if route is not None and sample.routes.get(route, 0) < must_route:
        raise BenchError(f"{run.mode}: expected {must_route} of the {run.records} records {route}, "
                         f"the engine counted {sample.routes}")

