"""A whole cluster's idle partitions for ``kmirror bench latency --idle-partitions`` (issue 69).

Operators mirror clusters, not one topic: thousands of partitions that barely move beside a
few that do. At each size the bench makes that many partitions at the source, in topics of
:data:`PER_TOPIC` partitions with :data:`RECORDS` records each (issue 69's shape: 1,000 topics
of 10 partitions, 10 records in each), copies them once with ``kmirror run --once`` (timed:
the one-shot figure), and then every mirror mode follows them beside its hot topic, as a job
started on a cluster does: it copies their records first (into the same destination topics:
the bench reads only the hot topic), then follows them idle. What a mode measures, after its
probe came through, is what following idle partitions costs.
"""

from __future__ import annotations

import re
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import kcodecs
from kcodecs import Record

from ..kafka import KafkaClient, NewTopic, TopicPartition

__all__ = ["IdleTopics", "PER_TOPIC", "RECORDS", "make_idle_topics", "copy_once"]

PER_TOPIC = 10
RECORDS = 10
_PRODUCE_CHUNK = 2000
"""Partitions' batches per produce call while filling."""


@dataclass(frozen=True)
class IdleTopics:
    """``partitions`` idle partitions in topics named ``<prefix>.<n>``."""

    prefix: str
    partitions: int

    @property
    def names(self) -> list[str]:
        return [f"{self.prefix}.{i:05d}" for i in range(-(-self.partitions // PER_TOPIC))]

    @property
    def regex(self) -> str:
        """A Java regex for the idle topics, to add to a mirror's selection ("" for none)."""
        return rf"{re.escape(self.prefix)}\.[0-9]+" if self.partitions else ""

    @property
    def records(self) -> int:
        return self.partitions * RECORDS

    def selection(self, topic: str) -> str:
        """The topics a mode mirrors: its own, and these."""
        return f"^({re.escape(topic)}|{self.regex})$" if self.partitions else f"^{re.escape(topic)}$"


def make_idle_topics(source: str, size: int, *, replication_factor: int = -1) -> IdleTopics:
    """Make ``size`` partitions at ``source`` and fill each with :data:`RECORDS` records."""
    idle = IdleTopics(f"latency-idle-{size}", size)
    with KafkaClient(source) as client:
        counts = [min(PER_TOPIC, size - i * PER_TOPIC) for i in range(len(idle.names))]
        client.create_topics([NewTopic(name, count, replication_factor=replication_factor)
                              for name, count in zip(idle.names, counts)])
        now = int(time.time() * 1000)
        batches = [(TopicPartition(name, p), kcodecs.build_batch([Record(value=b"idle-%d" % i, timestamp=now)
                                                                 for i in range(RECORDS)]))
                   for name, count in zip(idle.names, counts) for p in range(count)]
        for first in range(0, len(batches), _PRODUCE_CHUNK):
            client.produce(batches[first:first + _PRODUCE_CHUNK])
    return idle


def copy_once(source: str, destination: str, idle: IdleTopics, work: Path, extra: list[str]) -> float:
    """``kmirror run --once`` of the idle topics: its seconds, the job's start included, once the
    destination holds every record (read committed). Raises if it failed or left any out."""
    work.mkdir(parents=True, exist_ok=True)
    command = [sys.executable, "-m", "mirror.cli", "run", "--source", source, "--destination", destination,
               "--topics", f"^{idle.regex}$", "--once", "--checkpoint", str(work / "checkpoint"), *extra]
    began = time.perf_counter()
    with open(work / "kmirror-once.log", "w") as log:
        done = subprocess.run(command, stdout=subprocess.DEVNULL, stderr=log, stdin=subprocess.DEVNULL)
    took = time.perf_counter() - began
    if done.returncode != 0:
        raise RuntimeError(f"kmirror run --once exited {done.returncode} (log: {work / 'kmirror-once.log'})")
    with KafkaClient(destination) as client:
        counted = client.topics()
        partitions = [TopicPartition(name, p) for name in idle.names for p in range(counted.get(name, 0))]
        held = sum(client.list_offsets(partitions, "latest", isolation_level=1).values())
    if len(partitions) != idle.partitions or held < idle.records:
        raise RuntimeError(f"after kmirror run --once the destination has {len(partitions)} of {idle.partitions} "
                           f"partitions and {held} of {idle.records} records")
    return took
