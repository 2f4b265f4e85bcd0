"""``kmirror bench verify``: how long ``kmirror verify`` takes on a mirrored topic, and whether
its driver's memory stays flat as the topic grows.

The data is the bench's events (1 KiB JSON-like values, keyed, no kmirror no-keys flag) in lz4
batches filled as Java's producer fills its 16 KiB ``batch.size``, over 4 partitions, on
embedded brokers in subprocesses. ``kmirror run --once`` mirrors it first (not measured); then
``kmirror verify`` runs as a user runs it, on ``local[N]``, once per size: half the size, then
the size, side by side in one run. For each: wall time, the rate in MB/s and records/s per
core (what a cluster's time can be estimated from: its cores times the rate), and the peak
resident memory of the driver's Python and of its JVM (local mode: the executors' JVM too),
read from /proc while it runs.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass
from pathlib import Path

from kcodecs import Compression

from ..kafka import KafkaClient
from .clusters import bench_clusters, cluster_name
from .datagen import DataSpec, Layout, build_dataset
from .fill import fill_topic

__all__ = ["add_arguments", "run"]

MiB = 1024 * 1024
_RECORD_BYTES = 1024
_PARTITIONS = 4
_TOPIC = "events"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--total-mb", type=int, default=1024, help="the larger topic's payload (default 1024 MB); "
                        "the smaller is half of it")
    parser.add_argument("--cores", type=int, default=os.cpu_count() or 2, help="Spark's local[N] (default: all)")
    parser.add_argument("--quick", action="store_true", help="64 MB and 32 MB: a check that it runs, not a figure")
    parser.add_argument("--cluster", choices=("embedded", "kafka"), default="embedded",
                        help="'embedded': kmirror's brokers in subprocesses (default); 'kafka': real Apache Kafka "
                        "(KRaft, one node per cluster, the newest pinned version), whose fetches cost the machine "
                        "less than the embedded broker's")


@dataclass(frozen=True)
class VerifyRun:
    megabytes: float
    records: int
    seconds: float
    python_peak_mb: float
    jvm_peak_mb: float
    exit_code: int


def run(args: argparse.Namespace) -> int:
    total = (64 if args.quick else args.total_mb) * MiB
    print(f"verify bench: 1 KiB keyed records in lz4 batches of about 16 KiB (Java's batch.size), {_PARTITIONS} "
          f"partitions, {cluster_name(args.cluster)}; kmirror verify on local[{args.cores}]", flush=True)
    runs = []
    with tempfile.TemporaryDirectory(prefix="kmirror-bench-verify-") as tmp:
        for size in (total // 2, total):
            with bench_clusters(args.cluster, Path(tmp) / str(size)) as (source, destination):
                records = _mirrored(source, destination, size, Path(tmp) / f"ck{size}")
                runs.append(_verify(source, destination, size / MiB, records, args.cores))
            _print(runs[-1], args.cores)
    small, large = runs
    print(f"  doubling the topic: time x{large.seconds / small.seconds:.2f}, driver Python peak "
          f"x{large.python_peak_mb / small.python_peak_mb:.2f}, driver JVM peak x{large.jvm_peak_mb / small.jvm_peak_mb:.2f}")
    return 0 if all(r.exit_code == 0 for r in runs) else 1


def _mirrored(source: str, destination: str, size: int, checkpoint: Path) -> int:
    """Fill the source with ``size`` bytes of records and mirror them; return the record count."""
    from ..config import load_config
    from ..spark.job import run_mirror

    spec = DataSpec(Compression.LZ4, _RECORD_BYTES, size, partitions=_PARTITIONS, keyed_ratio=1.0,
                    base_timestamp_ms=int(time.time() * 1000))
    data = build_dataset(spec, Layout.UNFLAGGED)
    with KafkaClient(source) as client:
        fill_topic(client, _TOPIC, _PARTITIONS, data)
    run_mirror(load_config(None, {"source.bootstrap": source, "destination.bootstrap": destination, "topics": _TOPIC,
                                  "once": True, "name": "bench", "checkpoint": str(checkpoint)}))
    return data.records


def _verify(source: str, destination: str, megabytes: float, records: int, cores: int) -> VerifyRun:
    command = [sys.executable, "-m", "mirror.cli", "verify", "--source", source, "--destination", destination,
               "--topics", _TOPIC, "--name", "bench", "--master", f"local[{cores}]"]
    started = time.perf_counter()
    process = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    peaks = _Peaks(process.pid)
    peaks.start()
    out, err = process.communicate()
    seconds = time.perf_counter() - started
    peaks.stop.set()
    peaks.join()
    if process.returncode != 0:
        print(out, err, sep="\n", file=sys.stderr)
    for line in err.splitlines():
        if " verify: " in line:
            print("    " + line.split("verify: ", 1)[1], flush=True)
    return VerifyRun(megabytes, records, seconds, peaks.python_kb / 1024, peaks.jvm_kb / 1024, process.returncode)


def _print(r: VerifyRun, cores: int) -> None:
    print(f"  {r.megabytes:6.0f} MB  {r.records:>9,} records  {r.seconds:6.1f} s  "
          f"{r.megabytes / r.seconds / cores:5.1f} MB/s per core  {r.records / r.seconds / cores:8,.0f} records/s per core"
          f"  driver peak: Python {r.python_peak_mb:5.0f} MB, JVM {r.jvm_peak_mb:5.0f} MB"
          f"{'' if r.exit_code == 0 else f'  (exit {r.exit_code})'}", flush=True)


class _Peaks(threading.Thread):
    """The peak resident memory (VmHWM) of a process and of the JVM it starts, polled from /proc."""

    def __init__(self, pid: int):
        super().__init__(daemon=True)
        self.pid = pid
        self.python_kb = 0
        self.jvm_kb = 0
        self.stop = threading.Event()

    def run(self) -> None:
        while not self.stop.wait(0.25):
            self.python_kb = max(self.python_kb, _peak_kb(self.pid))
            for child in _children(self.pid):
                self.jvm_kb = max(self.jvm_kb, _peak_kb(child))


def _peak_kb(pid: int) -> int:
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmHWM:"):
                return int(line.split()[1])
    except OSError:
        pass
    return 0


def _children(pid: int) -> list[int]:
    """Descendant java processes of ``pid`` (PySpark starts the JVM through a shell script)."""
    found = []
    try:
        for task in Path(f"/proc/{pid}/task").iterdir():
            for child in (task / "children").read_text().split():
                found += ([int(child)] if "java" in Path(f"/proc/{child}/comm").read_text() else []) + \
                         _children(int(child))
    except OSError:
        pass
    return found
