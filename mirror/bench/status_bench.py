"""``kmirror bench status``: how long ``kmirror status`` takes to answer for a mirror of many
partitions (issue 52's target: under 3 s for 2,000).

Embedded brokers in subprocesses; ``--topics`` topics of ``--partitions / --topics``
partitions each, a record in every partition; ``kmirror run --once`` mirrors them (not
measured), in both delivery modes' state: exactly-once leaves its offsets topic, at-least-once
only its offset syncs. Then ``kmirror status`` runs as a user runs it, ``--runs`` times per
mode, and the wall time of each run, Python's start included, is reported (min, median, max).
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import kcodecs
from kcodecs import Record

from ..kafka import KafkaClient, NewTopic, TopicPartition
from .clusters import bench_clusters

__all__ = ["add_arguments", "run"]


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--partitions", type=int, default=2000, help="source partitions in all (default 2000)")
    parser.add_argument("--topics", type=int, default=20, help="topics they are spread over (default 20)")
    parser.add_argument("--runs", type=int, default=5, help="kmirror status runs per delivery mode (default 5)")


def run(args: argparse.Namespace) -> int:
    per_topic = max(1, args.partitions // args.topics)
    print(f"status bench: {args.topics} topics x {per_topic} partitions, a record in each, embedded brokers; "
          f"kmirror status timed {args.runs} times per delivery mode (wall time, Python's start included)",
          flush=True)
    failed = False
    for mode in ("exactly-once", "at-least-once"):
        with tempfile.TemporaryDirectory(prefix="kmirror-bench-status-") as tmp, \
                bench_clusters("embedded", Path(tmp)) as (source, destination):
            _mirrored(source, destination, args.topics, per_topic, mode, Path(tmp) / "ck")
            times = []
            for _ in range(args.runs):
                started = time.perf_counter()
                done = subprocess.run([sys.executable, "-m", "mirror.cli", "status", "--source", source,
                                       "--destination", destination, "--topics", "bench\\..*", "--name", "bench",
                                       "--max-lag", "0"], capture_output=True, text=True)
                times.append(time.perf_counter() - started)
                if done.returncode != 0:
                    failed = True
                    print(done.stdout, done.stderr, sep="\n", file=sys.stderr)
        print(f"  {mode:<14} {args.topics * per_topic} partitions: min {min(times):.2f} s, median "
              f"{statistics.median(times):.2f} s, max {max(times):.2f} s", flush=True)
    return 1 if failed else 0


def _mirrored(source: str, destination: str, topics: int, per_topic: int, mode: str, checkpoint: Path) -> None:
    from ..config import load_config
    from ..spark.job import run_mirror

    names = [f"bench.t{i}" for i in range(topics)]
    with KafkaClient(source) as client:
        client.create_topics([NewTopic(name, per_topic) for name in names])
        now = int(time.time() * 1000)
        client.produce([(TopicPartition(name, p), kcodecs.build_batch([Record(value=b"x", timestamp=now)]))
                        for name in names for p in range(per_topic)])
    run_mirror(load_config(None, {"source.bootstrap": source, "destination.bootstrap": destination,
                                  "topics": "bench\\..*", "once": True, "name": "bench", "delivery": mode,
                                  "checkpoint": str(checkpoint)}))
