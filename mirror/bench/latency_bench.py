"""``kmirror bench latency``: replication latency under a steady load, mode by mode, in one run.

A producer shaped like Java's (librdkafka with ``batch.size`` 16 KiB, ``linger.ms`` 5,
``acks=all``, idempotence, the codec) writes --rate records a second of --record-bytes to a
source topic of --partitions partitions, for --warmup and then --seconds seconds. A
read_committed librdkafka consumer at the destination reads every record and takes its arrival
time minus its CreateTime; the percentiles are over the records created during the measured
--seconds (the warm-up's are left out). Every mode copies its own topic on the same two
clusters, one mode after the other:

  kmirror-eos   kmirror run, exactly-once (the default), long-running
  kmirror-alo   kmirror run --delivery at-least-once
  loop          MirrorMaker 2's data path in librdkafka: a consumer (read_committed) -> producer
                loop, the producer as Java's defaults, same partition and timestamp
  mirrormaker2, mirrormaker2-eos
                real MirrorMaker 2 (--cluster kafka only), configured as kmirror bench mirror's peer
  transactions  no mirror: the load itself, written at the destination by a bare transactional
                producer committing every 20 ms, Kafka's own floor for exactly-once

Also reported: the load's own records' latency at the source (CreateTime to the source's
acknowledgement), a floor no mode can go under; the mirror's CPU (its whole process tree: for
kmirror the driver, Spark's JVM and every Python process) as a share of one core, under the
load and then idle for
--idle-seconds once the destination has caught up, and how many records arrived of those
produced. Clusters: two embedded brokers, each a process of its own (default), or two real
Apache Kafka clusters (--cluster kafka, KRaft, one node each, fetched with Maven on first use).
With --trace, kmirror's copiers also write down when each batch passed each stage of the
copy and every stall of their loops (mirror/engine/trace.py); their percentiles are printed
after the mode's line. Nothing here is asserted; docs/performance.md holds a run and its reading.

A whole cluster (issue 69): with --idle-partitions 0,10000 every round runs at each size. At a
size above 0 the source also holds that many idle partitions (topics of 10, 10 records each,
:mod:`.idle_partitions`), copied once first by ``kmirror run --once`` (its time is printed),
and every mirror follows them beside its hot topic (MirrorMaker 2 into the topics that copy
made, as an operator facing its CreateTopics failure would make them first). A table of each
mode's figures against the smallest size follows: what the idle partitions cost.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import multiprocessing
import os
import re
import signal
import subprocess
import sys
import tempfile
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Iterator, Sequence

from kcodecs import KMirrorError

from ..engine.trace import TRACE_ENV
from ..kafka import KafkaClient, NewTopic, TopicPartition
from .arrival import stop_process
from .clusters import bench_clusters
from .idle_partitions import IdleTopics, copy_once, make_idle_topics
from .proctree import TreeMeter
from .stats import percentile
from .trace_report import TraceReport, read_trace
from .steady import LoadSpec, loop_mirror, measure_latency, produce_steadily, record_values

__all__ = ["add_arguments", "run", "LatencyResult", "MODES", "percentile"]

MODES = ("kmirror-eos", "kmirror-alo", "loop", "mirrormaker2", "mirrormaker2-eos", "transactions")
FLOOR = "transactions"
"""No mirror: the load itself, at the destination, as a bare transactional producer committing
every 20 ms (kmirror's commit interval): Kafka's own floor for exactly-once on these clusters."""
_FLOOR_COMMIT_S = 0.020
_WARM_UP_TRANSACTION_RATE = 50
"""Records a second of the cluster warm-up's transactions: about one a transaction."""
MIRRORMAKER_MODES = ("mirrormaker2", "mirrormaker2-eos")
"""Real MirrorMaker 2, on real Kafka only (--cluster kafka)."""
_DELIVERY = {"kmirror-eos": "exactly-once", "kmirror-alo": "at-least-once"}
_PROBE_TIMEOUT_S = 180.0
JAVA_CLIENTS = Path(__file__).with_name("LatencyClients.java")
"""Java's producer and read_committed consumer in the load's and the reader's roles
(``--java-clients``), run from source by ``java`` with the Kafka jars on the class path."""
_READY_TIMEOUT_S = 180.0


@dataclass
class LatencyResult:
    mode: str
    produced: int
    measured: int
    """Records created in the measured window and read at the destination."""
    arrived: int
    """Records of the whole run (warm-up included) read at the destination."""
    p50_ms: float
    p90_ms: float
    p99_ms: float
    p999_ms: float
    max_ms: float
    source_p50_ms: float
    source_p99_ms: float
    """The load's own records, created in the measured window, from CreateTime to the source's
    acknowledgement: a floor under every mode (the source broker on the same machine)."""
    busy_cpu: float
    """The mirror's CPU seconds per second under the load (1.0 = one core)."""
    idle_cpu: float
    """The same, idle, once caught up."""
    notes: list[str] = field(default_factory=list)
    trace: TraceReport | None = None
    """With --trace, kmirror's copiers' stages and stalls in the measured window."""
    run: int = 1
    """The round of ``--runs`` it was measured in."""
    busy_cpu_by_role: dict[str, float] = field(default_factory=dict)
    """``busy_cpu`` split by the part of the mirror that used it (:func:`process_role`)."""
    idle_partitions: int = 0
    """The idle partitions the mirror followed beside its hot topic (``--idle-partitions``)."""


def process_role(command: str) -> str:
    """Which part of a mirror a process of its tree is, from its command line: kmirror's driver,
    Spark's JVM, Spark's Python workers, kmirror's copiers; MirrorMaker 2's JVM; the loop."""
    if "mirror.engine.copier" in command:
        return "copiers"
    if command.startswith("java") or "/java " in command:
        return "mirrormaker2 jvm" if "MirrorMaker" in command else "spark jvm"
    if "pyspark" in command:
        return "spark python workers"
    if "mirror.cli" in command:
        return "driver"
    return "other"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--modes", help=f"comma-separated, of {', '.join(MODES)} (default all; the MirrorMaker 2 "
                                         "modes only with --cluster kafka)")
    parser.add_argument("--rate", type=int, default=5000, help="records per second (default 5000)")
    parser.add_argument("--record-bytes", type=int, default=1024, help="value size (default 1024)")
    parser.add_argument("--partitions", type=int, default=4, help="source partitions (default 4)")
    parser.add_argument("--codec", default="lz4", choices=("none", "gzip", "snappy", "lz4", "zstd"),
                        help="the producer's compression.type (default lz4)")
    parser.add_argument("--seconds", type=float, default=60, help="measured seconds of load per mode (default 60)")
    parser.add_argument("--warmup", type=float, default=10, help="seconds of load before measuring (default 10)")
    parser.add_argument("--idle-seconds", type=float, default=20, help="idle CPU measured this long (default 20)")
    parser.add_argument("--cluster-warmup", type=float, default=30,
                        help="seconds of the load through the loop, and of transactions at the destination, before "
                             "the first mode, so that no mode runs on brokers whose JIT is still compiling (default "
                             "30; 0: none)")
    parser.add_argument("--cluster", choices=("embedded", "kafka"), default="embedded",
                        help="embedded brokers (default) or real Apache Kafka (needs Java 17 and mvn)")
    parser.add_argument("--kmirror-arg", action="append", default=[], metavar="ARG",
                        help="an extra argument for kmirror run (repeat it), e.g. --kmirror-arg=--trigger-interval=0")
    parser.add_argument("--trace", action="store_true",
                        help="kmirror modes: trace every copied batch through its copier (fetched, routed, produce "
                             "sent and acknowledged, commit began and ended) and every stall of a copier's loop over "
                             "20 ms, and print their percentiles (mirror/engine/trace.py; costs nothing when off)")
    parser.add_argument("--java-clients", action="store_true",
                        help="the load and the reader are Java's producer (its defaults, the codec) and a "
                             "read_committed Java consumer, from the Kafka jars the bench fetches, instead of "
                             "librdkafka's (needs Java 17)")
    parser.add_argument("--runs", type=int, default=1,
                        help="rounds of every mode on the same clusters, the order rotated by one mode each round "
                             "so that no mode always runs first or last; with more than one, a table of each "
                             "figure's min / median / max over the rounds follows (default 1)")
    parser.add_argument("--destination-nodes", type=int, choices=(1, 3), default=1,
                        help="--cluster kafka: 3 makes the destination three brokers, replication factor 3, "
                             "min.insync.replicas 2 (default 1)")
    parser.add_argument("--source-nodes", type=int, choices=(1, 3), default=1,
                        help="--cluster kafka: 3 makes the source three brokers (default 1)")
    parser.add_argument("--idle-partitions", default="0", metavar="N[,N...]",
                        help="sizes to run every round at: N idle partitions at the source (topics of 10, 10 records "
                             "each), copied once by kmirror run --once (timed), then followed by every mirror beside "
                             "its hot topic; e.g. 0,10000 (default 0). Past about 18,000 partitions a node, use 3 nodes "
                             "(a process here may open 20,000 files): idle topics then have replication factor 1")
    parser.add_argument("--json", type=Path, metavar="FILE", help="write the results as JSON")


def run(args: argparse.Namespace) -> int:
    if args.modes is None:
        modes = [m for m in MODES if args.cluster == "kafka" or m not in MIRRORMAKER_MODES]
    else:
        modes = [m for m in args.modes.split(",") if m]
    unknown = set(modes) - set(MODES)
    if unknown:
        print(f"kmirror bench latency: unknown modes {', '.join(sorted(unknown))}", file=sys.stderr)
        return 2
    if args.cluster != "kafka" and set(modes) & set(MIRRORMAKER_MODES):
        print("kmirror bench latency: the MirrorMaker 2 modes run on real Kafka only (--cluster kafka)",
              file=sys.stderr)
        return 2
    if args.cluster != "kafka" and (args.destination_nodes != 1 or args.source_nodes != 1):
        print("kmirror bench latency: three-node clusters are real Kafka's (--cluster kafka)", file=sys.stderr)
        return 2
    try:
        sizes = sorted({int(n) for n in args.idle_partitions.split(",") if n.strip()})
    except ValueError:
        sizes = []
    if not sizes or sizes[0] < 0:
        print("kmirror bench latency: --idle-partitions takes sizes such as 0,10000", file=sys.stderr)
        return 2
    if args.runs < 1:
        print("kmirror bench latency: --runs is at least 1", file=sys.stderr)
        return 2
    results = []
    failures: list[NotMeasured] = []
    one_shots: dict[int, float] = {}
    with tempfile.TemporaryDirectory(prefix="kmirror-latency-") as tmp, \
            bench_clusters(args.cluster, Path(tmp), destination_nodes=args.destination_nodes,
                           source_nodes=args.source_nodes, heap_mb=1024 if sizes[-1] else 512) as (src, dst):
        print(f"kmirror bench latency: {args.rate} records/s of {args.record_bytes} B, {args.codec}, "
              f"{args.partitions} partitions, {args.cluster} clusters (source: {args.source_nodes} node"
              f"{'s' if args.source_nodes > 1 else ''}, destination: {args.destination_nodes} "
              f"node{'s' if args.destination_nodes > 1 else ''}); {args.warmup:g} s warm-up + {args.seconds:g} s "
              f"measured per mode, {args.runs} round{'s' if args.runs > 1 else ''}; load and reader: "
              f"{'Java' if args.java_clients else 'librdkafka'} clients"
              + (f"; idle partitions: {', '.join(f'{n:,}' for n in sizes)}" if sizes != [0] else ""), flush=True)
        if args.cluster_warmup > 0:
            _warm_clusters(src, dst, Path(tmp) / "cluster-warm-up", args)
        for size in sizes:
            idle = _idle_topics(src, dst, size, Path(tmp), args, one_shots)
            for round_ in range(1, args.runs + 1):
                for mode in rotated(modes, round_ - 1):
                    named = (mode if args.runs == 1 else f"{mode}-{round_}") + (f"-idle{size}" if size else "")
                    try:
                        result = bench_mode(mode, src, dst, Path(tmp) / named, args, topic=f"latency-{named}",
                                            idle_topics=idle)
                    except RuntimeError as error:  # a mirror that cannot copy at this size is a finding
                        failures.append(NotMeasured(named, size, str(error), _log_tail(Path(tmp) / named)))
                        print(f"  {named}: not measured: {error}\n{failures[-1].log_tail}", flush=True)
                        continue
                    result.run = round_
                    results.append(result)
                    split = ", ".join(f"{role} {cpu * 100:.0f}%" for role, cpu in result.busy_cpu_by_role.items())
                    print(f"  {named}: p50 {result.p50_ms:.1f} ms, p99 {result.p99_ms:.1f} ms, "
                          f"CPU {result.busy_cpu * 100:.0f}% busy ({split or 'no mirror'}) / "
                          f"{result.idle_cpu * 100:.1f}% idle", flush=True)
                    if result.trace is not None:
                        print(result.trace.text() + "\n", flush=True)
    print("\n" + table(results))
    if args.runs > 1:
        print("\n" + spread_table(results))
    if len(sizes) > 1:
        print("\n" + ratio_table(results, sizes))
    for failure in failures:
        print(f"not measured: {failure.mode} ({failure.idle_partitions:,} idle partitions): {failure.reason}")
    for size, seconds in one_shots.items():
        print(f"one-shot: kmirror run --once over {size:,} idle partitions ({size * 10:,} records): {seconds:.1f} s, "
              f"the job's start included")
    if args.json:
        args.json.write_text(json.dumps({"parameters": {k: (str(v) if isinstance(v, Path) else v)
                                                        for k, v in vars(args).items() if k != "run"},
                                         "results": [asdict(r) for r in results],
                                         "not_measured": [asdict(f) for f in failures]}, indent=2) + "\n")
        print(f"wrote {args.json}")
    return 0


@dataclass(frozen=True)
class NotMeasured:
    """A mode that did not copy its probe records (or failed otherwise) at one size: MirrorMaker
    2 over a whole cluster's partitions, say (issue 69). The bench goes on with the others."""

    mode: str
    idle_partitions: int
    reason: str
    log_tail: str
    """The last lines of the mirror's own log, printed where the bench's directory is gone after."""


_LOG_TAIL_LINES = 15


def _log_tail(work: Path) -> str:
    """The end of the mode's mirror log: MirrorMaker 2's ``mm2.log``, or kmirror's job log."""
    for name in ("mm2.log", "kmirror.log"):
        log_file = work / name
        if log_file.exists():
            lines = log_file.read_text(errors="replace").splitlines()[-_LOG_TAIL_LINES:]
            return "".join(f"    | {line[:300]}\n" for line in lines)
    return "    (no mirror log)\n"


def table(results: Sequence[LatencyResult]) -> str:
    lines = ["| mode | idle partitions | p50 ms | p90 ms | p99 ms | p99.9 ms | max ms | source ack p50 / p99 ms "
             "| arrived / produced | CPU busy | CPU idle |",
             "|---|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|"]
    for r in results:
        lines.append(f"| {r.mode} | {r.idle_partitions:,} | {r.p50_ms:.1f} | {r.p90_ms:.1f} | {r.p99_ms:.1f} | "
                     f"{r.p999_ms:.1f} | {r.max_ms:.0f} | {r.source_p50_ms:.1f} / {r.source_p99_ms:.1f} | "
                     f"{r.arrived:,} / {r.produced:,} | {r.busy_cpu * 100:.0f}% | {r.idle_cpu * 100:.1f}% |")
    return "\n".join(lines)


def ratio_table(results: Sequence[LatencyResult], sizes: Sequence[int]) -> str:
    """Each mode's medians over its rounds at every size, as a ratio to the smallest size:
    what the idle partitions cost it (issue 69: p99 and busy CPU within 1.5x and 1.3x)."""
    lines = ["| mode | idle partitions | p50 ms | p99 ms | p99 / smallest | CPU busy % | CPU busy / smallest "
             "| CPU idle % |", "|---|--:|--:|--:|--:|--:|--:|--:|"]
    for mode in dict.fromkeys(r.mode for r in results):
        def median(size: int, figure) -> float:
            return percentile(sorted(figure(r) for r in results if r.mode == mode and r.idle_partitions == size), 0.5)

        base_p99, base_cpu = median(sizes[0], lambda r: r.p99_ms), median(sizes[0], lambda r: r.busy_cpu)
        for size in sizes:
            p99, cpu = median(size, lambda r: r.p99_ms), median(size, lambda r: r.busy_cpu)
            lines.append(f"| {mode} | {size:,} | {median(size, lambda r: r.p50_ms):.1f} | {p99:.0f} | "
                         f"{p99 / base_p99:.2f}x | {cpu * 100:.0f} | {cpu / base_cpu if base_cpu else float('nan'):.2f}x "
                         f"| {median(size, lambda r: r.idle_cpu) * 100:.1f} |")
    return "\n".join(lines)


def _idle_topics(source: str, destination: str, size: int, work: Path, args: argparse.Namespace,
                 one_shots: dict[int, float]) -> IdleTopics:
    """The idle partitions of ``size``, made and copied once (the one-shot time kept)."""
    if size == 0:
        return IdleTopics("", 0)
    replication = 1 if args.source_nodes > 1 or args.destination_nodes > 1 else -1
    idle = make_idle_topics(source, size, replication_factor=replication)
    extra = ["--replication-factor", "1"] if replication == 1 else []
    one_shots[size] = copy_once(source, destination, idle, work / f"once-{size}", extra)
    print(f"  one-shot: kmirror run --once copied {size:,} idle partitions ({idle.records:,} records) in "
          f"{one_shots[size]:.1f} s", flush=True)
    return idle


def rotated(modes: Sequence[str], by: int) -> list[str]:
    """``modes`` begun ``by`` places on: round ``r`` of ``--runs`` starts with its ``r``-th mode."""
    by %= len(modes)
    return [*modes[by:], *modes[:by]]


def spread_table(results: Sequence[LatencyResult]) -> str:
    """Each mode's figures as min / median / max over the rounds (one run is not a measurement
    on a shared machine: tails vary several-fold between runs)."""
    lines = ["| mode | runs | p50 ms | p99 ms | max ms | source ack p99 ms | CPU busy % | CPU idle % |",
             "|---|--:|--:|--:|--:|--:|--:|--:|"]
    for mode in dict.fromkeys(r.mode for r in results):
        runs = [r for r in results if r.mode == mode]

        def spread(figure, scale: float = 1.0, digits: int = 0) -> str:
            values = sorted(figure(r) * scale for r in runs)
            return " / ".join(f"{v:.{digits}f}" for v in (values[0], percentile(values, 0.5), values[-1]))

        lines.append(f"| {mode} | {len(runs)} | {spread(lambda r: r.p50_ms, digits=1)} | {spread(lambda r: r.p99_ms)} | "
                     f"{spread(lambda r: r.max_ms)} | {spread(lambda r: r.source_p99_ms)} | "
                     f"{spread(lambda r: r.busy_cpu, 100)} | {spread(lambda r: r.idle_cpu, 100, 1)} |")
    return "\n".join(lines)


def _warm_clusters(source: str, destination: str, work: Path, args: argparse.Namespace) -> None:
    """The load through the loop for ``--cluster-warmup`` seconds, on a topic of its own, with
    transactions at the destination meanwhile; printed, not reported. A broker's JVM compiles
    its hot code in the first tens of seconds of load, taking CPU from everything on this
    machine: without this, the first mode of a run paid for it (a copier of the first mode
    fell seconds behind and caught up for half a minute, docs/performance.md)."""
    transactions = LoadSpec(destination, "latency-warm-up-transactions", _WARM_UP_TRANSACTION_RATE, args.record_bytes,
                            args.codec, args.cluster_warmup, commit_interval_s=_FLOOR_COMMIT_S)
    with KafkaClient(destination) as client:
        client.create_topics([NewTopic(transactions.topic, 1)])
    warm = argparse.Namespace(**{**vars(args), "warmup": 0.0, "seconds": args.cluster_warmup, "idle_seconds": 0.0,
                                 "trace": False})
    spawn = multiprocessing.get_context("spawn")
    with spawn.Pool(1) as pool:
        committing = pool.apply_async(produce_steadily, (transactions,))
        result = bench_mode("loop", source, destination, work, warm, topic="latency-warm-up")
        committed = committing.get(timeout=args.cluster_warmup + 120)
    print(f"  cluster warm-up: {args.cluster_warmup:g} s of the load through the loop (p50 {result.p50_ms:.1f} ms, "
          f"p99 {result.p99_ms:.1f} ms) and {committed:,} records in transactions committed every "
          f"{_FLOOR_COMMIT_S * 1000:g} ms at the destination", flush=True)


def bench_mode(mode: str, source: str, destination: str, work: Path, args: argparse.Namespace,
               topic: str | None = None, idle_topics: IdleTopics = IdleTopics("", 0)) -> LatencyResult:
    work.mkdir(parents=True)
    topic = topic or f"latency-{mode}"
    with KafkaClient(source) as client:
        client.create_topics([NewTopic(topic, args.partitions)])
    if mode not in _DELIVERY:  # kmirror creates its destination topics itself
        with KafkaClient(destination) as client:
            client.create_topics([NewTopic(topic, args.partitions)])
    spawn = multiprocessing.get_context("spawn")
    with _mirror(mode, source, destination, topic, work, args, spawn, idle_topics) as pid:
        # Started is not copying: kmirror's copiers begin with the first micro-batch after its
        # executors are ready, MirrorMaker 2's tasks after Connect assigned them, and either
        # took longer than a warm-up (a backlog then drained in the measured window).
        probes = _probe(source, destination, topic, args.partitions, pid) if pid is not None else 0
        began_ms = int(time.time() * 1000)
        measured_from = began_ms + int(args.warmup * 1000)
        measured_until = measured_from + int(args.seconds * 1000)
        latencies_file = work / "latencies.txt"
        acks_file = work / "source-acks.txt"
        floor = mode == FLOOR
        load = LoadSpec(destination if floor else source, topic, args.rate, args.record_bytes, args.codec,
                        args.warmup + args.seconds, (measured_from, measured_until), str(acks_file),
                        _FLOOR_COMMIT_S if floor else None)
        expected = int(args.rate * (args.warmup + args.seconds)) + probes
        expected_file = work / "expected.txt"
        with _reader(args.java_clients, spawn, destination, topic, args.partitions, measured_from, measured_until,
                     expected, load.seconds + 120, latencies_file, expected_file) as reader:
            with _load(args.java_clients, spawn, load, work) as producing:
                time.sleep(args.warmup)
                with _meter(pid) as busy:
                    time.sleep(args.seconds)
                produced = producing(args.seconds + 120)
            expected_file.write_text(f"{produced + probes}\n")  # the reader stops once it has read them all
            reader(180)
        with _meter(pid) as idle:
            time.sleep(args.idle_seconds if pid is not None else 0)
    lines = latencies_file.read_text().splitlines() if latencies_file.exists() else []
    arrived = int(lines[-1].split()[-1]) - probes if lines and lines[-1].startswith("#") else 0
    latencies = sorted(float(line) for line in lines if line and not line.startswith("#"))
    acks = sorted(float(line) for line in acks_file.read_text().split()) if acks_file.exists() else []
    traced = (read_trace(work / "trace", measured_from / 1000, measured_until / 1000)
              if args.trace and mode.startswith("kmirror") else None)
    return LatencyResult(mode, produced, len(latencies), arrived, percentile(latencies, 0.5),
                         percentile(latencies, 0.9), percentile(latencies, 0.99), percentile(latencies, 0.999),
                         latencies[-1] if latencies else float("nan"), percentile(acks, 0.5), percentile(acks, 0.99),
                         busy.cpu_s / args.seconds,
                         idle.cpu_s / args.idle_seconds if args.idle_seconds and pid is not None else 0.0,
                         trace=traced, busy_cpu_by_role=_by_role(busy.cpu_by_command, args.seconds),
                         idle_partitions=idle_topics.partitions)


def _by_role(cpu_by_command: dict[str, float], seconds: float) -> dict[str, float]:
    roles: dict[str, float] = {}
    for command, cpu_s in cpu_by_command.items():
        role = process_role(command)
        roles[role] = roles.get(role, 0.0) + cpu_s / seconds
    return dict(sorted(roles.items(), key=lambda kv: -kv[1]))


@contextlib.contextmanager
def _load(java: bool, spawn, load: LoadSpec, work: Path) -> Iterator:
    """The steady producer, running; yields a function that waits (at most its argument's
    seconds) for it to end and returns how many records the source acknowledged."""
    if not java:
        with spawn.Pool(1) as pool:
            producing = pool.apply_async(produce_steadily, (load,))
            yield lambda timeout: producing.get(timeout=timeout)
        return
    values, count = work / "values.txt", work / "produced.txt"
    values.write_text("".join(value.decode("ascii") + "\n" for value in record_values(load.record_bytes)))
    since, until = load.window_ms
    process = _java(["produce", load.bootstrap, load.topic, str(load.rate), load.codec, str(load.seconds),
                     str(values), str(since), str(until), str(count), str(load.acks_path),
                     str(round((load.commit_interval_s or 0) * 1000))], work / "java-producer.log")

    def produced(timeout: float) -> int:
        process.wait(timeout)
        if process.returncode != 0:
            raise RuntimeError(f"Java's producer exited with {process.returncode} (log: {work / 'java-producer.log'})")
        return int(count.read_text())

    try:
        yield produced
    finally:
        if process.poll() is None:
            process.kill()


@contextlib.contextmanager
def _reader(java: bool, spawn, destination: str, topic: str, partitions: int, measured_from: int, measured_until: int,
            expected: int, timeout_s: float, out: Path, expected_file: Path) -> Iterator:
    """The read_committed consumer at the destination, running; yields a function that waits
    (at most its argument's seconds) for it to have read ``expected`` records."""
    if java:
        process = _java(["read", destination, topic, str(partitions), str(measured_from), str(measured_until),
                         str(expected), str(timeout_s), str(out), str(expected_file)], out.with_name("java-reader.log"))
        try:
            yield lambda timeout: _join(process, timeout)
        finally:
            if process.poll() is None:
                process.kill()
        return
    consumer = spawn.Process(target=measure_latency, args=(destination, topic, partitions, measured_from,
                                                           measured_until, expected, timeout_s, str(out),
                                                           str(expected_file)))
    consumer.start()
    try:
        yield consumer.join
    finally:
        if consumer.is_alive():
            consumer.terminate()


def _meter(pid: int | None):
    """A :class:`TreeMeter` of the mirror's process tree; for no mirror, a meter of nothing."""
    return TreeMeter(pid) if pid is not None else contextlib.nullcontext(argparse.Namespace(cpu_s=0.0, cpu_by_command={}))


def _join(process: subprocess.Popen, timeout: float) -> None:
    """As :meth:`multiprocessing.Process.join`: waits at most ``timeout``, quietly."""
    with contextlib.suppress(subprocess.TimeoutExpired):
        process.wait(timeout)


def _java(arguments: list[str], log: Path) -> subprocess.Popen:
    """:data:`JAVA_CLIENTS` with ``arguments``, the Kafka clients of the brokers the bench runs on the class path."""
    from ..realkafka import KAFKA_4
    from ..realkafka.distribution import java_command

    java = java_command()
    if java is None:
        raise RuntimeError("--java-clients needs Java 17: neither $JAVA_HOME/bin/java nor java on the PATH")
    with open(log, "wb") as out:
        return subprocess.Popen([java, "-cp", f"{KAFKA_4.resolve()}/*", str(JAVA_CLIENTS), *arguments],
                                stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)


@contextlib.contextmanager
def _mirror(mode: str, source: str, destination: str, topic: str, work: Path, args, spawn,
            idle: IdleTopics) -> Iterator[int]:
    """The mirror of ``mode``, started, following ``idle`` too; yields its pid (the root of what
    is metered; None: no mirror)."""
    if mode == FLOOR:
        yield None
        return
    if mode in MIRRORMAKER_MODES:
        with _mirrormaker(mode, source, destination, topic, work, args, idle) as running:
            yield running
        return
    if mode == "loop":
        ready = work / "ready"
        process = spawn.Process(target=loop_mirror, args=(source, destination, topic, topic, args.codec,
                                                          args.warmup + args.seconds + args.idle_seconds + 300,
                                                          str(ready)))
        process.start()
        try:
            _wait(lambda: ready.exists() or not process.is_alive(), "the loop to join its group")
            yield process.pid
        finally:
            process.terminate()
            process.join(30)
        return
    log_path = work / "kmirror.log"
    command = [sys.executable, "-m", "mirror.cli", "run", "--source", source, "--destination", destination,
               "--topics", idle.selection(topic), "--checkpoint", str(work / "checkpoint"), "--delivery", _DELIVERY[mode],
               *args.kmirror_arg]
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    if args.trace:
        env[TRACE_ENV] = str(work / "trace")
    with open(log_path, "w") as log_file:
        job = subprocess.Popen(command, stderr=log_file, stdout=subprocess.DEVNULL, env=env, start_new_session=True)
    try:
        _wait(lambda: "executors ready" in log_path.read_text() or job.poll() is not None,
              f"kmirror run to start (log: {log_path})")
        if job.poll() is not None:
            raise RuntimeError(f"kmirror run exited with {job.returncode}:\n{log_path.read_text()[-2000:]}")
        yield job.pid
    finally:
        if job.poll() is None:
            job.send_signal(signal.SIGTERM)
            try:
                job.wait(120)
            except subprocess.TimeoutExpired:
                os.killpg(job.pid, signal.SIGKILL)


@contextlib.contextmanager
def _mirrormaker(mode: str, source: str, destination: str, topic: str, work: Path, args,
                 idle: IdleTopics) -> Iterator[int]:
    """Real MirrorMaker 2 (dedicated mode), configured as ``kmirror bench mirror``'s peer is
    (:mod:`.mirrormaker`), the configuration printed and kept in the mode's directory."""
    from .latency_proxy import free_port
    from .mirrormaker import CONFIGURATION_FILE, launch, properties

    exactly_once = mode == "mirrormaker2-eos"
    config = properties(source, destination, topic, args.partitions, exactly_once=exactly_once, alias="latency",
                        rest_port=free_port() if exactly_once else None,
                        topics=f"{re.escape(topic)}|{idle.regex}" if idle.partitions else None)
    print(f"  {mode}: MirrorMaker 2 ({CONFIGURATION_FILE}):\n" + "".join(f"    {k} = {v}\n" for k, v in config.items()),
          end="", flush=True)
    process = launch(work, config)
    try:
        yield process.pid
    finally:
        stop_process(process, signal.SIGTERM, 30)


def _probe(source: str, destination: str, topic: str, partitions: int, pid: int) -> int:
    """Write a record to every partition of ``topic`` and wait until the destination's copy
    holds them all: the mirror's data path runs. Returns how many were written (they are read
    at the destination, and counted apart from the load's)."""
    from confluent_kafka import Producer

    producer = Producer({"bootstrap.servers": source, "acks": "all"})
    for partition in range(partitions):
        producer.produce(topic, b"probe", partition=partition)  # created before the measured window
    producer.flush(30)
    tps = [TopicPartition(topic, p) for p in range(partitions)]

    def copied(client: KafkaClient) -> bool:
        if not _alive(pid):
            raise RuntimeError(f"the mirror (pid {pid}) exited before it copied its probe records")
        try:
            return sum(client.list_offsets(tps, "latest").values()) >= partitions
        except KMirrorError:  # the destination topic is not there yet
            return False

    with KafkaClient(destination) as client:
        _wait(lambda: copied(client), "the mirror to copy its probe records", _PROBE_TIMEOUT_S)
    return partitions


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


def _wait(predicate, what: str, timeout_s: float = _READY_TIMEOUT_S) -> None:
    deadline = time.monotonic() + timeout_s
    while not predicate():
        if time.monotonic() > deadline:
            raise RuntimeError(f"timed out waiting for {what}")
        time.sleep(0.2)

