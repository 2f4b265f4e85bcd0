"""One measured copy in a process of its own: ``python -m mirror.bench.worker SPEC.json RESULT.json``.

``kmirror bench mirror`` starts one of these per mode and run, so the CPU seconds and peak
RSS it reports belong to that copy alone: not to the brokers (separate processes), not to
the bench driver, not to another mode. Only the copy itself is timed; the interpreter start,
imports and connecting the clients (metadata included) are not: a running mirror has done
them long before. CPU is ``getrusage(RUSAGE_SELF)`` user + system over the copy, every
thread included (librdkafka's compress in its own threads); peak RSS is the high-water mark
of the worker's memory (:func:`peak_rss_bytes`).

The Spark mode runs a JVM and Python workers below this process, and the MirrorMaker 2 and
``kmirror run`` modes a process of their own, so they are measured over the process tree
instead (see :mod:`.proctree`).
"""

from __future__ import annotations

import cProfile
import io
import json
import pstats
import resource
import sys
import time
from dataclasses import asdict
from pathlib import Path
from typing import Callable

from .mode_run import ModeRun
from .stats import Sample

__all__ = ["measure", "main"]


def peak_rss_bytes() -> int:
    """This process's peak resident set size.

    On Linux ``ru_maxrss`` would be wrong here: it survives ``execve``, so a worker started
    from the bench driver inherits the driver's peak. ``VmHWM`` belongs to the current
    address space, which ``execve`` replaces.
    """
    try:
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) * 1024
    except OSError:
        pass
    maxrss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return maxrss if sys.platform == "darwin" else maxrss * 1024  # macOS reports bytes, the others KiB


def measure(copy: Callable[[], dict[str, int]], *, profile: bool = False) -> Sample:
    """Run ``copy`` (which returns records per routing class, or {}) and measure this process."""
    profiler = cProfile.Profile() if profile else None
    before = resource.getrusage(resource.RUSAGE_SELF)
    began = time.perf_counter()
    if profiler is not None:
        routes = profiler.runcall(copy)
    else:
        routes = copy()
    wall = time.perf_counter() - began
    after = resource.getrusage(resource.RUSAGE_SELF)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return Sample(wall, cpu, peak_rss_bytes(), routes, _profile_text(profiler) if profiler else "")


def _profile_text(profiler: cProfile.Profile) -> str:
    out = io.StringIO()
    stats = pstats.Stats(profiler, stream=out)
    stats.sort_stats("tottime").print_stats(25)
    stats.sort_stats("cumulative").print_stats(25)
    return out.getvalue()


def run(spec: ModeRun) -> Sample:
    """Connect (not timed), then copy (timed). Imports stay inside, so each mode's RSS holds only
    its own libraries."""
    if spec.mode == "pass-through-spark":
        from .copiers import copy_spark

        return copy_spark(spec)
    if spec.mode.startswith("mirrormaker2"):
        from .mirrormaker import copy_mirrormaker

        return copy_mirrormaker(spec)
    if spec.mode.startswith("kmirror-run"):
        from .kmirror_run import copy_kmirror_run

        return copy_kmirror_run(spec)
    if spec.mode in ("confluent-kafka", "kafka-python"):
        from . import peers

        prepare = peers.confluent if spec.mode == "confluent-kafka" else peers.kafka_python
    else:
        from .copiers import prepared as prepare
    with prepare(spec) as copy:
        return measure(copy, profile=spec.profile)


def main(argv: list[str] | None = None) -> int:
    spec_path, result_path = argv or sys.argv[1:]
    sample = run(ModeRun.from_json(Path(spec_path).read_text()))
    Path(result_path).write_text(json.dumps(asdict(sample)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
