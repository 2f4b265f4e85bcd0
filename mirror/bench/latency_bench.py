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

Also reported: the mirror's CPU (its whole process tree: for kmirror the driver, Spark's JVM
and every Python process) as a share of one core, under the load and then idle for
--idle-seconds once the destination has caught up, and how many records arrived of those
produced. Clusters: two embedded brokers, each a process of its own (default), or two real
Apache Kafka clusters (--cluster kafka, KRaft, one node each, fetched with Maven on first use).
With --trace, kmirror's copiers also write down when each batch passed each stage of the
copy and every stall of their loops (mirror/engine/trace.py); their percentiles are printed
after the mode's line. Nothing here is asserted; docs/performance.md holds a run and its reading.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import multiprocessing
import os
import signal
import subprocess
import sys
import tempfile
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Iterator, Sequence

from ..broker import BrokerProcess
from ..engine.trace import TRACE_ENV
from ..kafka import KafkaClient, NewTopic
from .proctree import TreeMeter
from .stats import percentile
from .trace_report import TraceReport, read_trace
from .steady import LoadSpec, loop_mirror, measure_latency, produce_steadily

__all__ = ["add_arguments", "run", "LatencyResult", "MODES", "percentile"]

MODES = ("kmirror-eos", "kmirror-alo", "loop")
_DELIVERY = {"kmirror-eos": "exactly-once", "kmirror-alo": "at-least-once"}
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
    busy_cpu: float
    """The mirror's CPU seconds per second under the load (1.0 = one core)."""
    idle_cpu: float
    """The same, idle, once caught up."""
    notes: list[str] = field(default_factory=list)
    trace: TraceReport | None = None
    """With --trace, kmirror's copiers' stages and stalls in the measured window."""


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--modes", default=",".join(MODES), help=f"comma-separated, of {', '.join(MODES)} (default all)")
    parser.add_argument("--rate", type=int, default=5000, help="records per second (default 5000)")
    parser.add_argument("--record-bytes", type=int, default=1024, help="value size (default 1024)")
    parser.add_argument("--partitions", type=int, default=4, help="source partitions (default 4)")
    parser.add_argument("--codec", default="lz4", choices=("none", "gzip", "snappy", "lz4", "zstd"),
                        help="the producer's compression.type (default lz4)")
    parser.add_argument("--seconds", type=float, default=60, help="measured seconds of load per mode (default 60)")
    parser.add_argument("--warmup", type=float, default=10, help="seconds of load before measuring (default 10)")
    parser.add_argument("--idle-seconds", type=float, default=20, help="idle CPU measured this long (default 20)")
    parser.add_argument("--cluster", choices=("embedded", "kafka"), default="embedded",
                        help="embedded brokers (default) or real Apache Kafka (needs Java 17 and mvn)")
    parser.add_argument("--kmirror-arg", action="append", default=[], metavar="ARG",
                        help="an extra argument for kmirror run (repeat it), e.g. --kmirror-arg=--trigger-interval=0")
    parser.add_argument("--trace", action="store_true",
                        help="kmirror modes: trace every copied batch through its copier (fetched, routed, produce "
                             "sent and acknowledged, commit began and ended) and every stall of a copier's loop over "
                             "20 ms, and print their percentiles (mirror/engine/trace.py; costs nothing when off)")
    parser.add_argument("--json", type=Path, metavar="FILE", help="write the results as JSON")


def run(args: argparse.Namespace) -> int:
    modes = [m for m in args.modes.split(",") if m]
    unknown = set(modes) - set(MODES)
    if unknown:
        print(f"kmirror bench latency: unknown modes {', '.join(sorted(unknown))}", file=sys.stderr)
        return 2
    results = []
    with tempfile.TemporaryDirectory(prefix="kmirror-latency-") as tmp, _clusters(args.cluster, Path(tmp)) as (src, dst):
        print(f"kmirror bench latency: {args.rate} records/s of {args.record_bytes} B, {args.codec}, "
              f"{args.partitions} partitions, {args.cluster} clusters; {args.warmup:g} s warm-up + {args.seconds:g} s "
              f"measured per mode", flush=True)
        for mode in modes:
            result = bench_mode(mode, src, dst, Path(tmp) / mode, args)
            results.append(result)
            print(f"  {mode}: p50 {result.p50_ms:.1f} ms, p99 {result.p99_ms:.1f} ms, "
                  f"CPU {result.busy_cpu * 100:.0f}% busy / {result.idle_cpu * 100:.1f}% idle", flush=True)
            if result.trace is not None:
                print(result.trace.text() + "\n", flush=True)
    print("\n" + table(results))
    if args.json:
        args.json.write_text(json.dumps({"parameters": {k: (str(v) if isinstance(v, Path) else v)
                                                        for k, v in vars(args).items() if k != "run"},
                                         "results": [asdict(r) for r in results]}, indent=2) + "\n")
        print(f"wrote {args.json}")
    return 0


def table(results: Sequence[LatencyResult]) -> str:
    lines = ["| mode | p50 ms | p90 ms | p99 ms | p99.9 ms | max ms | arrived / produced | CPU busy | CPU idle |",
             "|---|--:|--:|--:|--:|--:|--:|--:|--:|"]
    for r in results:
        lines.append(f"| {r.mode} | {r.p50_ms:.1f} | {r.p90_ms:.1f} | {r.p99_ms:.1f} | {r.p999_ms:.1f} | {r.max_ms:.0f} | "
                     f"{r.arrived:,} / {r.produced:,} | {r.busy_cpu * 100:.0f}% | {r.idle_cpu * 100:.1f}% |")
    return "\n".join(lines)


def bench_mode(mode: str, source: str, destination: str, work: Path, args: argparse.Namespace) -> LatencyResult:
    work.mkdir(parents=True)
    topic = f"latency-{mode}"
    with KafkaClient(source) as client:
        client.create_topics([NewTopic(topic, args.partitions)])
    if mode == "loop":
        with KafkaClient(destination) as client:
            client.create_topics([NewTopic(topic, args.partitions)])
    spawn = multiprocessing.get_context("spawn")
    with _mirror(mode, source, destination, topic, work, args, spawn) as pid:
        began_ms = int(time.time() * 1000)
        measured_from = began_ms + int(args.warmup * 1000)
        measured_until = measured_from + int(args.seconds * 1000)
        latencies_file = work / "latencies.txt"
        load = LoadSpec(source, topic, args.rate, args.record_bytes, args.codec, args.warmup + args.seconds)
        expected = int(args.rate * (args.warmup + args.seconds))
        consumer = spawn.Process(target=measure_latency, args=(destination, topic, args.partitions, measured_from,
                                                               measured_until, expected, load.seconds + 120,
                                                               str(latencies_file)))
        consumer.start()
        with spawn.Pool(1) as pool:
            producing = pool.apply_async(produce_steadily, (load,))
            time.sleep(args.warmup)
            with TreeMeter(pid) as busy:
                time.sleep(args.seconds)
            produced = producing.get(timeout=args.seconds + 120)
        consumer.join(180)
        if consumer.is_alive():
            consumer.terminate()
        with TreeMeter(pid) as idle:
            time.sleep(args.idle_seconds)
    lines = latencies_file.read_text().splitlines()
    arrived = int(lines[-1].split()[-1]) if lines and lines[-1].startswith("#") else 0
    latencies = sorted(float(line) for line in lines if line and not line.startswith("#"))
    traced = (read_trace(work / "trace", measured_from / 1000, measured_until / 1000)
              if args.trace and mode != "loop" else None)
    return LatencyResult(mode, produced, len(latencies), arrived, percentile(latencies, 0.5),
                         percentile(latencies, 0.9), percentile(latencies, 0.99), percentile(latencies, 0.999),
                         latencies[-1] if latencies else float("nan"), busy.cpu_s / args.seconds,
                         idle.cpu_s / args.idle_seconds, trace=traced)


@contextlib.contextmanager
def _mirror(mode: str, source: str, destination: str, topic: str, work: Path, args, spawn) -> Iterator[int]:
    """The mirror of ``mode``, running and ready; yields its pid (the root of what is metered)."""
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
               "--topics", f"^{topic}$", "--checkpoint", str(work / "checkpoint"), "--delivery", _DELIVERY[mode],
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


def _wait(predicate, what: str) -> None:
    deadline = time.monotonic() + _READY_TIMEOUT_S
    while not predicate():
        if time.monotonic() > deadline:
            raise RuntimeError(f"timed out waiting for {what}")
        time.sleep(0.2)


@contextlib.contextmanager
def _clusters(kind: str, work: Path) -> Iterator[tuple[str, str]]:
    if kind == "kafka":
        from ..realkafka import KafkaCluster

        with KafkaCluster(work / "source-kafka") as src, KafkaCluster(work / "destination-kafka") as dst:
            yield src.bootstrap, dst.bootstrap
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

