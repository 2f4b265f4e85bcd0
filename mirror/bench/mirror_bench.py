"""``kmirror bench mirror``: copy the same data every way, side by side, and compare.

Every mode copies the same generated source topic (one per codec and record size) from a
source broker to a fresh topic on a destination broker. The brokers are separate
processes, and each run of each mode is a process of its own, so the CPU seconds and peak
RSS reported are the mirror's alone. Modes run interleaved, each round starting one mode
later (A B C, B C A, ...), and each measure's median over --repeats rounds is reported.

modes:
  raw                 the I/O ceiling: fetch raw, zero the base offset, produce; no CRC, no routing
  pass-through        kmirror's copy engine, no-keys-flag data, partitioning preserve
  inspect             the engine on unkeyed data without the flag (as librdkafka writes it), by-key:
                      decompress to check the keys, forward the original bytes
  recompress          the engine on keyed data into another partition count: every batch rebuilt
  confluent-kafka     a Consumer -> Producer loop with the same codec (librdkafka)
  kafka-python        a KafkaConsumer -> KafkaProducer loop with the same codec
  pass-through-spark  (--spark) the pass-through copy through `kmirror run --once` on local[2]

MB/s and CPU s/GB count record data (keys and values, uncompressed; MB = 10^6 bytes);
wire MB/s counts the source batches as stored. See docs/performance.md for a full run.
"""

from __future__ import annotations

import argparse
import contextlib
import importlib.util
import json
import os
import subprocess
import sys
import tempfile
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Iterator, Sequence

from kcodecs import Compression, KMirrorError

from ..broker import BrokerProcess
from ..kafka import KafkaClient, NewTopic, TopicPartition
from .datagen import DataSpec, Dataset, Layout, build_dataset
from .report import plot, ratios_table, results_table, scenario_label
from .stats import ModeResult, Sample, Scenario, machine_info, ratios, summarise, to_json
from .timing import rounds
from .worker import ModeRun

__all__ = ["MODES", "LAYOUT_OF_MODE", "BenchError", "Settings", "settings_from", "bench", "run_worker", "check_copy",
           "add_arguments", "run"]

MODES = ("raw", "pass-through", "inspect", "recompress", "confluent-kafka", "kafka-python")
SPARK_MODE = "pass-through-spark"
LAYOUT_OF_MODE = {
    "raw": Layout.FLAGGED, "pass-through": Layout.FLAGGED, "inspect": Layout.UNFLAGGED, "recompress": Layout.KEYED,
    "confluent-kafka": Layout.FLAGGED, "kafka-python": Layout.FLAGGED, SPARK_MODE: Layout.FLAGGED,
}
EXPECTED_ROUTE = {"pass-through": ("passed-through", 1.0), "inspect": ("inspected", 1.0), "recompress": ("rebuilt", 0.95),
                  SPARK_MODE: ("passed-through", 1.0)}
"""The routing class an engine mode's records must take, and the least share of them that must,
or the mode measured something else. Random keys route a small batch (10 KiB records make
12-record batches) to a single partition now and then, which is inspected, not rebuilt."""
_NEEDS = {"confluent-kafka": "confluent_kafka", "kafka-python": "kafka", SPARK_MODE: "pyspark"}
_MB = 10**6
_WORKER_TIMEOUT_S = 3600

FULL = {"codecs": "none,gzip,snappy,lz4,zstd", "record_sizes": "100,1024,10240", "total_mb": 64, "repeats": 3}
QUICK = {"codecs": "gzip,lz4,zstd", "record_sizes": "1024", "total_mb": 32, "repeats": 3}


class BenchError(KMirrorError):
    """The bench could not measure: a worker failed, or a copy is incomplete or took the wrong route."""


@dataclass(frozen=True)
class Settings:
    """The parsed command line."""

    codecs: tuple[Compression, ...]
    record_sizes: tuple[int, ...]
    total_bytes: int
    batch_bytes: int
    keyed_ratio: float
    partitions: int
    repeats: int
    modes: tuple[str, ...]
    seed: int
    fetch_max_bytes: int
    source: str | None
    destination: str | None
    profile: bool

    def data_spec(self, codec: Compression, record_bytes: int) -> DataSpec:
        return DataSpec(codec, record_bytes, self.total_bytes, self.batch_bytes, self.keyed_ratio, self.partitions, self.seed)

    def parameters(self) -> dict:
        data = asdict(self)
        data["codecs"] = [codec.name.lower() for codec in self.codecs]
        return data


def settings_from(args: argparse.Namespace) -> Settings:
    preset = QUICK if args.quick else FULL

    def pick(name: str):
        given = getattr(args, name)
        return preset[name] if given is None else given

    modes = tuple(pick_list(args.modes or ",".join(MODES), MODES + (SPARK_MODE,), "mode"))
    if args.spark and SPARK_MODE not in modes:
        modes += (SPARK_MODE,)
    if (args.source is None) != (args.destination is None):
        raise BenchError("--source and --destination go together")
    settings = Settings(
        codecs=tuple(Compression.parse(c) for c in pick_list(pick("codecs"), [c.name.lower() for c in Compression], "codec")),
        record_sizes=_sizes(pick("record_sizes")),
        total_bytes=int(pick("total_mb") * _MB), batch_bytes=args.batch_kib * 1024, keyed_ratio=args.keyed_ratio,
        partitions=args.partitions, repeats=pick("repeats"), modes=modes, seed=args.seed,
        fetch_max_bytes=args.fetch_max_bytes, source=args.source, destination=args.destination, profile=args.profile,
    )
    if settings.repeats < 1:
        raise BenchError(f"--repeats must be at least 1, not {settings.repeats}")
    for size in settings.record_sizes:
        try:
            settings.data_spec(settings.codecs[0], size)
        except ValueError as exc:
            raise BenchError(str(exc)) from None
    return settings


def _sizes(text: str) -> tuple[int, ...]:
    try:
        sizes = tuple(int(size) for size in text.split(","))
    except ValueError:
        raise BenchError(f"--record-sizes wants comma-separated byte counts, not {text!r}") from None
    if min(sizes) < 1:
        raise BenchError(f"record sizes must be positive, not {text!r}")
    return sizes


def pick_list(text: str, allowed: Sequence[str], what: str) -> list[str]:
    chosen = [item.strip() for item in text.split(",") if item.strip()]
    unknown = [item for item in chosen if item not in allowed]
    if unknown or not chosen:
        raise BenchError(f"unknown {what} {', '.join(unknown) or '(none given)'}; choose from {', '.join(allowed)}")
    return chosen


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--quick", action="store_true",
                        help=f"a subset: codecs {QUICK['codecs']}, {QUICK['record_sizes']}-byte records, "
                             f"{QUICK['total_mb']} MB, {QUICK['repeats']} rounds (about 3 minutes on 2 cores)")
    parser.add_argument("--codecs", help=f"comma-separated (default {FULL['codecs']})")
    parser.add_argument("--record-sizes", help=f"value bytes per record, comma-separated (default {FULL['record_sizes']})")
    parser.add_argument("--total-mb", type=float, help=f"record data per source topic, in MB (default {FULL['total_mb']})")
    parser.add_argument("--repeats", type=int, help=f"interleaved rounds; medians are reported (default {FULL['repeats']})")
    parser.add_argument("--modes", help=f"comma-separated subset of {','.join(MODES)},{SPARK_MODE} (default: the first six)")
    parser.add_argument("--spark", action="store_true", help=f"also run {SPARK_MODE}: the Spark job's micro-batch overhead")
    parser.add_argument("--batch-kib", type=int, default=128, help="uncompressed size of a source batch (default 128)")
    parser.add_argument("--keyed-ratio", type=float, default=1.0,
                        help="share of keyed records in the recompress mode's topic (default 1.0)")
    parser.add_argument("--partitions", type=int, default=1, help="source partitions (default 1; recompress copies into one more)")
    parser.add_argument("--seed", type=int, default=42, help="data generator seed (default 42)")
    parser.add_argument("--fetch-max-bytes", type=int, default=8 * 1024 * 1024, help="bytes per fetch (default 8 MiB)")
    parser.add_argument("--source", metavar="HOST:PORT", help="use this cluster as the source instead of an embedded broker")
    parser.add_argument("--destination", metavar="HOST:PORT", help="use this cluster as the destination (topics are left behind)")
    parser.add_argument("--json", metavar="FILE", type=Path, help="write the results as JSON")
    parser.add_argument("--plot", metavar="FILE.png", type=Path, help="draw MB/s by mode and codec (needs matplotlib)")
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
        raise BenchError("; ".join(missing) + ": pip install 'kmirror[bench]' (and 'kmirror[spark]' for --spark)")


def bench(settings: Settings) -> list[ModeResult]:
    """Every scenario (codec x record size) in turn; returns every mode's medians."""
    results: list[ModeResult] = []
    run_id = time.strftime("%H%M%S")
    print(f"kmirror bench mirror: {len(settings.codecs) * len(settings.record_sizes)} scenarios x "
          f"{len(settings.modes)} modes x {settings.repeats} rounds, {settings.total_bytes / _MB:g} MB each", flush=True)
    with tempfile.TemporaryDirectory(prefix="kmirror-bench-") as tmp:
        for codec in settings.codecs:
            for size in settings.record_sizes:
                spec = settings.data_spec(codec, size)
                scenario_dir = Path(tmp) / f"{codec.name.lower()}-{size}"
                results += _scenario(settings, spec, scenario_dir, f"bench{run_id}-{codec.name.lower()}-{size}")
    return results


def _scenario(settings: Settings, spec: DataSpec, work: Path, prefix: str) -> list[ModeResult]:
    scenario = Scenario(spec.codec.name.lower(), spec.record_bytes, spec.batch_bytes, spec.partitions)
    label = scenario_label(scenario)
    with _clusters(settings, work) as (source, destination):
        datasets = _fill(source, spec, prefix, label, {Layout.FLAGGED} | {LAYOUT_OF_MODE[m] for m in settings.modes})
        runs = {mode: _runner(settings, source, destination, spec, datasets[LAYOUT_OF_MODE[mode]], prefix, mode, work)
                for mode in settings.modes}
        # The first copy into a fresh broker runs up to 2x slower than the next (measured): warm both up.
        _runner(settings, source, destination, spec, datasets[Layout.FLAGGED], prefix, "raw", work, "warm-up")()
        samples: dict[str, list[Sample]] = {mode: [] for mode in settings.modes}
        for round_, mode, sample in rounds(runs, settings.repeats, rotate=True):
            samples[mode].append(sample)
            data = datasets[LAYOUT_OF_MODE[mode]]
            print(f"  [{label}] round {round_ + 1}/{settings.repeats}  {mode:<19}{data.payload_bytes / _MB / sample.wall_s:8.1f} MB/s"
                  f"{len(data.batches) / sample.wall_s:9,.0f} batches/s{sample.cpu_s:7.2f} s CPU"
                  f"{sample.peak_rss_bytes / _MB:6.0f} MB RSS", flush=True)
        if settings.profile:
            print(runs["pass-through"](profile=True).profile if "pass-through" in runs else "", flush=True)
    results = []
    for mode in settings.modes:
        data = datasets[LAYOUT_OF_MODE[mode]]
        results.append(summarise(mode, scenario, data.records, len(data.batches), data.payload_bytes, data.wire_bytes,
                                 samples[mode]))
    print(results_table(results), flush=True)
    return results


@contextlib.contextmanager
def _clusters(settings: Settings, work: Path) -> Iterator[tuple[str, str]]:
    """The user's clusters, or two fresh embedded brokers (child processes) for one scenario."""
    if settings.source and settings.destination:
        yield settings.source, settings.destination
        return
    brokers = [BrokerProcess(work / "source"), BrokerProcess(work / "destination")]
    try:
        for broker in brokers:
            broker.start()
        yield brokers[0].bootstrap, brokers[1].bootstrap
    finally:
        for broker in brokers:
            if broker.process is not None and broker.process.poll() is None:
                broker.terminate()


def _fill(source: str, spec: DataSpec, prefix: str, label: str, layouts: set[Layout]) -> dict[Layout, Dataset]:
    """Generate each layout the modes need and produce it to its source topic (not timed)."""
    datasets = {}
    with KafkaClient(source) as client:
        for layout in sorted(layouts, key=list(Layout).index):
            began = time.perf_counter()
            data = build_dataset(spec, layout)
            topic = f"{prefix}-{layout.value}"
            client.create_topics([NewTopic(topic, spec.partitions)])
            for start in range(0, len(data.batches), 64):
                client.produce([(TopicPartition(topic, p), batch) for p, batch in data.batches[start : start + 64]])
            datasets[layout] = data
            print(f"  [{label}] source topic {layout.value}: {data.records:,} records, {data.payload_bytes / _MB:.1f} MB "
                  f"of data in {len(data.batches)} batches of {data.mean_batch_bytes / 1024:.1f} KiB stored on average "
                  f"({data.records / len(data.batches):.1f} records each), {data.wire_bytes / _MB:.1f} MB on the wire "
                  f"({data.payload_bytes / data.wire_bytes:.2f}x), built and produced in {time.perf_counter() - began:.1f} s",
                  flush=True)
    return datasets


def _runner(settings: Settings, source: str, destination: str, spec: DataSpec, data: Dataset, prefix: str,
            mode: str, work: Path, name: str | None = None):
    """A callable that runs ``mode`` once more, into a fresh destination topic, and checks the copy."""
    count = iter(range(1, 1 << 30))
    name = name or mode
    destination_partitions = spec.partitions + 1 if mode == "recompress" else spec.partitions

    def run_once(*, profile: bool = False) -> Sample:
        number = next(count)
        topic = f"{prefix}-{LAYOUT_OF_MODE[mode].value}"
        run = ModeRun(mode, source, destination, topic, f"{topic}.{name}.{number}", data.end_offsets(spec.partitions),
                      destination_partitions, spec.codec.name.lower(), settings.fetch_max_bytes,
                      str(work / f"{name}-{number}"), profile)
        with KafkaClient(destination) as client:
            client.create_topics([NewTopic(run.destination_topic, destination_partitions)])
            sample = run_worker(run)
            copied = client.list_offsets([TopicPartition(run.destination_topic, p) for p in range(destination_partitions)],
                                         "latest")
        check_copy(run, sample, sum(copied.values()))
        return sample

    return run_once


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


def check_copy(run: ModeRun, sample: Sample, copied: int) -> None:
    """Refuse a sample that did not copy every record, or whose records took another route than
    the mode is named for: its time would measure something else."""
    if copied != run.records:
        raise BenchError(f"{run.mode}: the destination holds {copied} records, the source {run.records}")
    if run.mode in EXPECTED_ROUTE:
        route, share = EXPECTED_ROUTE[run.mode]
        if sample.routes.get(route, 0) < share * run.records:
            raise BenchError(f"{run.mode}: expected {share:.0%} of the records {route}, the engine counted {sample.routes}")

