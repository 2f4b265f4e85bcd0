"""When a mirror that runs as a process of its own (MirrorMaker 2, ``kmirror run``) copied the
first and the last record of a bench topic, seen from the destination.

Such a mirror cannot time itself the way the bench's in-process modes do, and its start-up
(a JVM, Connect's task assignment, Spark) is not its copy. So the destination's end offsets
are polled every 20 ms: the copy starts when the first record is there and ends when the
last is. Without transactions the high watermark reaching the record count is the end;
with them (a marker per transaction, a count no one knows ahead) the end is where the log
stopped growing, once it is stable (every transaction committed), and the time is that of
its last move, not of the wait that proves it.
"""

from __future__ import annotations

import os
import signal
import subprocess
import time
from pathlib import Path
from typing import Sequence

from ..kafka import READ_COMMITTED, KafkaClient, TopicPartition
from .proctree import TreeMeter
from .stats import Sample

__all__ = ["Watched", "MirrorProcessError", "measure_mirror", "wait_first", "wait_last", "stop_process"]

POLL_S = 0.02
START_TIMEOUT_S = 300.0
"""A JVM and Connect, or Spark, starting on two busy cores."""
STALL_S = 60.0
SETTLE_S = 2.0
"""Transactions: the end must stay put this long, and stable, before the copy counts as done."""


class MirrorProcessError(RuntimeError):
    """The mirror exited, copied nothing, or stalled: the run is broken, not slow."""


class Watched:
    """The mirror's process, with the files that tell why it failed."""

    def __init__(self, name: str, process: subprocess.Popen, logs: Sequence[Path]):
        self.name, self.process, self.logs = name, process, logs

    def check(self) -> None:
        if self.process.poll() is not None:
            raise MirrorProcessError(f"{self.name} exited with {self.process.returncode}: {self.tail()}")

    def tail(self, lines: int = 15) -> str:
        found = []
        for path in self.logs:
            try:
                found += path.read_text(errors="replace").splitlines()[-lines:]
            except OSError:
                continue
        return "\n".join(found) or "(no log)"


def measure_mirror(mirror: Watched, began: float, destination: str, partitions: Sequence[TopicPartition], records: int,
                   *, transactional: bool, stop_timeout_s: float) -> Sample:
    """Time and meter ``mirror`` (started at ``perf_counter()`` ``began``) from its first record
    at the destination to its last; then stop it with a SIGTERM to its process group, as an
    operator's deploy would."""
    try:
        with KafkaClient(destination) as client:
            first = wait_first(client, partitions, mirror)
            with TreeMeter(mirror.process.pid) as meter:
                last = wait_last(client, partitions, records, mirror, transactional=transactional)
        return Sample(last - first, meter.cpu_s, meter.peak_rss_bytes, start_s=last - began)
    finally:
        stop_process(mirror.process, signal.SIGTERM, stop_timeout_s)


def _end(client: KafkaClient, partitions: Sequence[TopicPartition], isolation_level: int = 0) -> int:
    return sum(client.list_offsets(partitions, "latest", isolation_level=isolation_level).values())


def wait_first(client: KafkaClient, partitions: Sequence[TopicPartition], mirror: Watched) -> float:
    """``perf_counter()`` when the destination first holds a record."""
    deadline = time.monotonic() + START_TIMEOUT_S
    while _end(client, partitions) == 0:
        mirror.check()
        if time.monotonic() > deadline:
            raise MirrorProcessError(f"{mirror.name} copied nothing within {START_TIMEOUT_S:.0f} s: {mirror.tail()}")
        time.sleep(POLL_S)
    return time.perf_counter()


def wait_last(client: KafkaClient, partitions: Sequence[TopicPartition], records: int, mirror: Watched, *,
              transactional: bool) -> float:
    """``perf_counter()`` when the destination held the last of ``records`` (see the module's docstring)."""
    last, moved = -1, time.perf_counter()
    while True:
        mirror.check()
        end = _end(client, partitions)
        now = time.perf_counter()
        if end != last:
            last, moved = end, now
        if not transactional and end >= records:
            return now
        if transactional and end >= records and now - moved >= SETTLE_S \
                and _end(client, partitions, READ_COMMITTED) == end:
            return moved
        if now - moved > STALL_S:
            raise MirrorProcessError(f"{mirror.name} stalled at {end} of {records} records: {mirror.tail()}")
        time.sleep(POLL_S)


def stop_process(process: subprocess.Popen, signal_number: int, timeout_s: float = 60.0) -> None:
    """Send ``signal_number`` to the process's group (its session: it was started in one of its
    own), wait, and SIGKILL the group if it is still there."""
    if process.poll() is not None:
        return
    os.killpg(process.pid, signal_number)
    try:
        process.wait(timeout_s)
    except subprocess.TimeoutExpired:
        os.killpg(process.pid, signal.SIGKILL)
        process.wait(timeout_s)
