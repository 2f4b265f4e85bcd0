"""``kmirror run`` itself, long-running, as a mode of ``kmirror bench mirror``: what a user
deploys, against MirrorMaker 2 (:mod:`.mirrormaker`) on the same clusters.

The job starts as a user starts it (``python -m mirror.cli run``, its defaults, a checkpoint
of its own, the destination topic named by ``--rename``) and runs as it does for months, not
``--once``: Spark plans micro-batches, the resident copiers copy between them. The bench
topic is a backlog, so this measures its steady copy; what is timed runs from the first
record the destination holds to the last, as for MirrorMaker 2 (:mod:`.arrival`), and the
sample also carries the seconds from the job's start (Spark's included). CPU seconds and
peak RSS are the job's whole process tree over the copy: the driver, Spark's JVM, the
executors' Python workers and the copiers. Then the job gets a SIGTERM, as on a deploy.

``kmirror-run`` copies at-least-once, ``kmirror-run-eos`` exactly-once (the job's default).
"""

from __future__ import annotations

import re
import subprocess
import sys
import time
from pathlib import Path

from ..kafka import TopicPartition
from .arrival import Watched, measure_mirror
from .mode_run import ModeRun
from .stats import Sample

__all__ = ["copy_kmirror_run", "CONFIGURATION_FILE"]

CONFIGURATION_FILE = "command.txt"
"""What a run writes its command line to, in its work directory (the bench keeps it)."""


def copy_kmirror_run(spec: ModeRun) -> Sample:
    """Run ``kmirror run`` on ``spec`` until the destination holds every record; measure it."""
    exactly_once = spec.mode == "kmirror-run-eos"
    work = Path(spec.work_dir)
    suffix = spec.destination_topic.removeprefix(spec.source_topic)
    command = [sys.executable, "-m", "mirror.cli", "run", "--source", spec.source, "--destination", spec.destination,
               "--topics", re.escape(spec.source_topic), "--rename", "{topic}" + suffix,
               "--checkpoint", str(work / "checkpoint"),
               "--delivery", "exactly-once" if exactly_once else "at-least-once"]
    (work / CONFIGURATION_FILE).write_text(" ".join(command) + "\n")
    partitions = [TopicPartition(spec.destination_topic, p) for p in range(spec.destination_partitions)]
    began_process = time.perf_counter()
    with open(work / "kmirror-run.log", "wb") as log:
        process = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=log, stdin=subprocess.DEVNULL,
                                   start_new_session=True)
    return measure_mirror(Watched("kmirror run", process, [work / "kmirror-run.log"]), began_process, spec.destination,
                          partitions, spec.records, transactional=exactly_once, stop_timeout_s=120)
