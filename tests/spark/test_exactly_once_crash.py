"""Exactly-once through crashes: every process of ``kmirror run`` (driver, Spark's JVM, Python
workers, resident copiers) is SIGKILLed at random moments mid-copy, as a lost machine would be,
and restarted on the same checkpoint each time, while the source is still being written (so
the copiers are following it when they die). librdkafka's read_committed consumer must then find every
source record at the destination once, in per-partition order.

The sizes are tests/support/sizes.py's: at CI size 2 kills of a 50,000-record copy, on the
embedded broker and on real Kafka 4.x (both clusters, committed by Kafka's own transaction
coordinator: transactions v2 on 4.x, with an epoch bump at every EndTxn); under
``./dev test --acceptance`` 10 kills of 1,000,000 records, issue 10's and issue 34's
acceptance. On a three-broker real destination, the partition leader is killed
mid-transaction instead.
"""

from __future__ import annotations

import os
import itertools
import random
import re
import signal
import subprocess
import sys
import threading
import time

import pytest
from librdkafka_reader import read_values
from real_kafka import pairs, partition_leader
from sizes import size

import kcodecs
from kcodecs import Record
from mirror.bench.proctree import process_tree
from mirror.broker import BrokerProcess, EmbeddedBroker
from mirror.kafka import KafkaClient, NewTopic, TopicPartition

pytestmark = pytest.mark.slow

ONE_SHOT_RECORDS = size("crash.broker").records
"""Records of the one-shot copies whose destination broker or partition leader is killed."""
PARTITIONS = 4
BATCH_SIZES = (2000,) + (20,) * 10
"""Records per source batch, in turn: 2,000 records (about 18 KiB of lz4) pass through, ten of 20
(about 260 bytes each) coalesce into one destination batch."""
NOW_MS = int(time.time() * 1000)
"""Record timestamps: recent, or the destination's 7-day retention deletes their segment once a
transaction marker, stamped now, rolls it."""


def _fill(client: KafkaClient, records: int = ONE_SHOT_RECORDS, seconds: float = 0.0) -> dict[int, list[bytes]]:
    """``records`` records spread evenly over ``seconds``, in batches of :data:`BATCH_SIZES` in
    turn: big ones pass through, runs of small ones are coalesced (issue 40)."""
    client.create_topics([NewTopic("events", PARTITIONS)])
    produced: dict[int, list[bytes]] = {p: [] for p in range(PARTITIONS)}
    per_partition = records // PARTITIONS
    rounds, start = [], 0
    for batch_size in itertools.cycle(BATCH_SIZES):
        if start >= per_partition:
            break
        rounds.append((start, min(start + batch_size, per_partition)))
        start += batch_size
    began = time.monotonic()
    for n, (start, end) in enumerate(rounds):
        for p in range(PARTITIONS):
            batch = [Record(key=None, value=b"p%d-%08d" % (p, i), timestamp=NOW_MS + i) for i in range(start, end)]
            client.produce([(TopicPartition("events", p), kcodecs.build_batch(batch, compression="lz4"))])
            produced[p] += [r.value for r in batch]
        time.sleep(max(0.0, began + seconds * (n + 1) / len(rounds) - time.monotonic()))
    return produced


class _Writing(threading.Thread):
    """:func:`_fill` in the background: the copy must be under way at every kill, and resident
    copiers copy a static backlog within the first run or two."""

    def __init__(self, bootstrap: str, records: int, seconds: float):
        super().__init__()
        self.bootstrap, self.records, self.seconds = bootstrap, records, seconds
        self.produced: dict[int, list[bytes]] = {}

    def run(self) -> None:
        with KafkaClient(self.bootstrap) as client:
            self.produced = _fill(client, self.records, self.seconds)


def _read_committed(bootstrap: str) -> dict[int, list[bytes]]:
    return read_values(bootstrap, "events", PARTITIONS)


def _command(src: str, dst: str, checkpoint, micro_batches: int, *extra: str, records: int = ONE_SHOT_RECORDS) -> list[str]:
    return [sys.executable, "-m", "mirror.cli", "run", "--source", src, "--destination", dst, "--topics", "events",
            "--checkpoint", str(checkpoint), "--delivery", "exactly-once", "--transaction-timeout", "20",
            "--max-records-per-trigger", str(max(records // micro_batches, 1000)), *extra]


_ENV = {**os.environ, "PYTHONUNBUFFERED": "1"}


def _start_and_wait_for_copying(command: list[str], log_path, rng: random.Random, most_s: float) -> subprocess.Popen:
    """``kmirror run`` in a process group of its own, returned once copying is under way: after
    its first progress line, plus a random pause of up to ``most_s``."""
    with open(log_path, "w") as log_file:
        job = subprocess.Popen(command, stderr=log_file, stdout=subprocess.DEVNULL, env=_ENV, start_new_session=True)
    deadline = time.monotonic() + 180
    while "records," not in log_path.read_text() and job.poll() is None and time.monotonic() < deadline:
        time.sleep(0.2)
    time.sleep(rng.uniform(0.0, most_s))
    assert job.poll() is None, f"kmirror run exited with {job.returncode}:\n" + log_path.read_text()[-3000:]
    return job


def _kill_everything(root: int) -> None:
    """SIGKILL the job's every process at once, as a lost machine: the driver, Spark's JVM (in a
    session of its own), the Python workers and the resident copiers (in the worker daemon's
    process group), so none of them commits on its way out."""
    for pid in sorted(process_tree(root)):
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass


def _assert_copied_exactly(produced: dict[int, list[bytes]], copied: dict[int, list[bytes]]) -> None:
    for p in range(PARTITIONS):
        lost = len(set(produced[p]) - set(copied[p]))
        duplicated = len(copied[p]) - len(set(copied[p]))
        assert (lost, duplicated) == (0, 0), f"events/{p}: {lost} lost, {duplicated} duplicated"
        assert copied[p] == produced[p], f"events/{p}: out of order"


@pytest.mark.parametrize("clusters", pairs("embedded", "kafka"), indirect=True)
def test_sigkills_of_the_whole_mirror_lose_and_duplicate_nothing(tmp_path, clusters):
    rng = random.Random(20261123)
    sized = size("crash.kafka" if clusters.kinds == ("kafka", "kafka") else "crash.embedded")
    kills, records = sized.kills, sized.records
    src, dst = clusters.source, clusters.destination
    writing = _Writing(src.bootstrap, records, seconds=kills * sized.write_s_per_kill)  # growing through every kill
    writing.start()
    command = _command(src.bootstrap, dst.bootstrap, tmp_path / "ck", 40, "--trigger-interval", "0", records=records)
    try:
        for kill in range(kills):
            job = _start_and_wait_for_copying(command, tmp_path / f"run-{kill}.log", rng, 2.5)
            _kill_everything(job.pid)
            job.wait(30)
    finally:
        writing.join(600)
    produced = writing.produced
    # What is left after the kills is copied in a few micro-batches, not 40: small triggers are
    # for the kills to land mid-copy; after them they cost minutes on a loaded CI machine (past
    # 300 s in a CI run, 57 s alone).
    finish = _command(src.bootstrap, dst.bootstrap, tmp_path / "ck", 4, "--trigger-interval", "0", records=records)
    finished = subprocess.run(finish + ["--once"], capture_output=True, text=True, env=_ENV, timeout=1800)
    assert finished.returncode == 0, finished.stderr[-3000:]
    _assert_copied_exactly(produced, _read_committed(dst.bootstrap))
    logs = "".join((tmp_path / f"run-{kill}.log").read_text() for kill in range(kills)) + finished.stderr
    assert re.search(r"coalesced [1-9]\d* batches", logs), "no run of small batches was coalesced"


def test_a_destination_broker_killed_mid_transaction_loses_and_duplicates_nothing(tmp_path):
    rng = random.Random(7)
    with EmbeddedBroker(tmp_path / "src") as src:
        with KafkaClient(src.bootstrap) as source:
            produced = _fill(source)
        dst = BrokerProcess(tmp_path / "dst").start()
        try:
            command = _command(src.bootstrap, dst.bootstrap, tmp_path / "ck", 20, "--once")
            job = _start_and_wait_for_copying(command, tmp_path / "run.log", rng, 1.5)
            dst.kill()  # in the middle of some task's transaction
            dst = BrokerProcess(tmp_path / "dst", port=dst.port).start()
            # The job waits the outage out and replays the interrupted tasks (issue 14).
            assert job.wait(600) == 0, (tmp_path / "run.log").read_text()[-3000:]
            copied = _read_committed(dst.bootstrap)
        finally:
            dst.kill()
    _assert_copied_exactly(produced, copied)


@pytest.mark.kafka
def test_the_real_destination_partition_leader_killed_mid_transaction_loses_and_duplicates_nothing(
        tmp_path, start_kafka):
    """Three real brokers at the destination (replication factor 3, min.insync.replicas 2):
    the leader of a destination partition is SIGKILLed while tasks write transactions, then
    started again. The job rides it out (NOT_LEADER, the coordinator moving) and finishes."""
    rng = random.Random(11)
    records = size("crash.leader").records
    src, dst = start_kafka(), start_kafka(nodes=3)
    with KafkaClient(src.bootstrap) as source, KafkaClient(dst.bootstrap) as destination:
        produced = _fill(source, records)
        destination.create_topics([NewTopic("events", PARTITIONS)])
    leader = partition_leader(dst.bootstrap, "events", 0)  # CI once met metadata without the new topic's partitions
    command = _command(src.bootstrap, dst.bootstrap, tmp_path / "ck", 20, "--once", records=records)
    job = _start_and_wait_for_copying(command, tmp_path / "run.log", rng, 1.5)
    dst.kill(leader)  # in the middle of some task's transaction
    time.sleep(rng.uniform(1.0, 5.0))
    dst.start_node(leader)
    assert job.wait(900) == 0, (tmp_path / "run.log").read_text()[-3000:]
    _assert_copied_exactly(produced, _read_committed(dst.bootstrap))
