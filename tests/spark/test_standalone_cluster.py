"""``kmirror run --master spark://…`` against a real Spark standalone cluster (a master and one
worker started from PySpark's jars), exactly as a user runs it: the copy tasks run in the
worker's executor, whose Python is the one the driver names (the cluster's own environment
sets none), between two embedded brokers. librdkafka reads the destination back: every record,
in order, in every partition.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from librdkafka_reader import read_values
from standalone_cluster import loopback_env, standalone_cluster

import kcodecs
from kcodecs import Record
from mirror.broker import EmbeddedBroker
from mirror.kafka import KafkaClient, NewTopic, TopicPartition

pytestmark = pytest.mark.slow

PARTITIONS, BATCHES, PER_BATCH = 3, 10, 100
CODECS = ("lz4", "zstd", "none")
NOW_MS = int(time.time() * 1000)
KMIRROR = Path(sys.executable).with_name("kmirror")
"""The console script ``pip install kmirror`` puts beside the interpreter: what a user runs."""


def _fill(client: KafkaClient) -> dict[int, list[bytes]]:
    client.create_topics([NewTopic("events", PARTITIONS)])
    produced: dict[int, list[bytes]] = {p: [] for p in range(PARTITIONS)}
    for p in range(PARTITIONS):
        for b in range(BATCHES):
            records = [Record(key=b"k%d" % i, value=b"p%d-%d-%d" % (p, b, i), timestamp=NOW_MS + i)
                       for i in range(PER_BATCH)]
            client.produce([(TopicPartition("events", p), kcodecs.build_batch(records, compression=CODECS[b % 3]))])
            produced[p] += [r.value for r in records]
    return produced


def _kmirror_run(cwd: Path, *args: str, timeout_s: float = 300) -> tuple[int, str]:
    """``kmirror ARGS`` to its end: its exit code and its log (stderr). Its whole process group,
    the driver's JVM and Python workers included, is killed if it outlives ``timeout_s``."""
    job = subprocess.Popen([str(KMIRROR), *args], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
                           env=loopback_env(), cwd=cwd, start_new_session=True)
    try:
        _, log = job.communicate(timeout=timeout_s)
    except subprocess.TimeoutExpired:
        os.killpg(job.pid, signal.SIGKILL)
        _, log = job.communicate()
        pytest.fail(f"kmirror run still running after {timeout_s} s:\n{log}")
    return job.returncode, log


def test_kmirror_run_copies_exactly_on_a_standalone_cluster(tmp_path):
    with standalone_cluster(tmp_path / "spark", cores=2, memory="1g") as cluster, \
            EmbeddedBroker(tmp_path / "src") as src, EmbeddedBroker(tmp_path / "dst") as dst:
        with KafkaClient(src.bootstrap) as source:
            produced = _fill(source)
        returncode, log = _kmirror_run(tmp_path, "run", "--once", "--master", cluster.master_url,
                                       "--source", src.bootstrap, "--destination", dst.bootstrap,
                                       "--topics", "events", "--checkpoint", str(tmp_path / "ck"))
        assert returncode == 0, log
        assert f"kmirror copied {PARTITIONS * BATCHES * PER_BATCH} records" in log, log
        copied = read_values(dst.bootstrap, "events", PARTITIONS)
        assert copied == produced
        # The copy ran on the cluster, not in a local Spark inside the driver.
        assert [(app["name"], app["state"]) for app in cluster.finished_apps()] == [("kmirror", "FINISHED")]
        assert any("Starting Python task execution" in path.read_text() for path in cluster.executor_logs())
