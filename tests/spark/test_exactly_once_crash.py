"""Exactly-once through crashes: ``kmirror run``'s whole process group (driver, JVM, Python
workers) is SIGKILLed at random moments mid-copy, as a lost machine would be, and restarted on
the same checkpoint each time. librdkafka's read_committed consumer must then find every
source record at the destination once, in per-partition order.

The default is a CI-sized run; ``KMIRROR_CRASH_KILLS=10 KMIRROR_CRASH_RECORDS=1000000`` is the
acceptance run of issue 10.
"""

from __future__ import annotations

import os
import random
import signal
import subprocess
import sys
import time

import pytest
from confluent_kafka import Consumer
from confluent_kafka import TopicPartition as CTP

import kcodecs
from kcodecs import Record
from mirror.broker import BrokerProcess, EmbeddedBroker
from mirror.kafka import KafkaClient, NewTopic, TopicPartition

pytestmark = pytest.mark.slow

KILLS = int(os.environ.get("KMIRROR_CRASH_KILLS", "3"))
RECORDS = int(os.environ.get("KMIRROR_CRASH_RECORDS", "200000"))
PARTITIONS = 4
PER_BATCH = 500


def _fill(client: KafkaClient) -> dict[int, list[bytes]]:
    client.create_topics([NewTopic("events", PARTITIONS)])
    produced: dict[int, list[bytes]] = {p: [] for p in range(PARTITIONS)}
    per_partition = RECORDS // PARTITIONS
    for p in range(PARTITIONS):
        for start in range(0, per_partition, PER_BATCH):
            records = [Record(key=None, value=b"p%d-%08d" % (p, i), timestamp=1_700_000_000_000 + i)
                       for i in range(start, min(start + PER_BATCH, per_partition))]
            client.produce([(TopicPartition("events", p), kcodecs.build_batch(records, compression="lz4"))])
            produced[p] += [r.value for r in records]
    return produced


def _read_committed(bootstrap: str) -> dict[int, list[bytes]]:
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "verify", "enable.auto.commit": False,
                         "isolation.level": "read_committed", "enable.partition.eof": True})
    consumer.assign([CTP("events", p, 0) for p in range(PARTITIONS)])
    seen: dict[int, list[bytes]] = {p: [] for p in range(PARTITIONS)}
    done: set[int] = set()
    try:
        while len(done) < PARTITIONS:
            for message in consumer.consume(10_000, timeout=10):
                if message.error():
                    assert message.error().code() == -191, message.error()  # _PARTITION_EOF
                    done.add(message.partition())
                else:
                    seen[message.partition()].append(message.value())
    finally:
        consumer.close()
    return seen


def test_sigkills_of_the_whole_mirror_lose_and_duplicate_nothing(tmp_path):
    rng = random.Random(20261123)
    with EmbeddedBroker(tmp_path / "src") as src, EmbeddedBroker(tmp_path / "dst") as dst:
        with KafkaClient(src.bootstrap) as source:
            produced = _fill(source)
        command = [sys.executable, "-m", "mirror.cli", "run", "--source", src.bootstrap, "--destination",
                   dst.bootstrap, "--topics", "events", "--checkpoint", str(tmp_path / "ck"), "--delivery",
                   "exactly-once", "--max-records-per-trigger", str(max(RECORDS // 40, 1000)),
                   "--trigger-interval", "0", "--transaction-timeout", "20"]
        env = {**os.environ, "PYTHONUNBUFFERED": "1"}
        for kill in range(KILLS):
            log_path = tmp_path / f"run-{kill}.log"
            with open(log_path, "w") as log_file:
                job = subprocess.Popen(command, stderr=log_file, stdout=subprocess.DEVNULL, env=env,
                                       start_new_session=True)
                # Kill once copying is under way: after the first progress line, at a random moment.
                deadline = time.monotonic() + 180
                while "records," not in log_path.read_text() and job.poll() is None and time.monotonic() < deadline:
                    time.sleep(0.2)
                time.sleep(rng.uniform(0.0, 2.5))
                os.killpg(job.pid, signal.SIGKILL)
                job.wait(30)
        finished = subprocess.run(command + ["--once"], capture_output=True, text=True, env=env, timeout=900)
        assert finished.returncode == 0, finished.stderr[-3000:]
        copied = _read_committed(dst.bootstrap)
    for p in range(PARTITIONS):
        lost = len(set(produced[p]) - set(copied[p]))
        duplicated = len(copied[p]) - len(set(copied[p]))
        assert (lost, duplicated) == (0, 0), f"events/{p}: {lost} lost, {duplicated} duplicated"
        assert copied[p] == produced[p], f"events/{p}: out of order"


def test_a_destination_broker_killed_mid_transaction_loses_and_duplicates_nothing(tmp_path):
    rng = random.Random(7)
    with EmbeddedBroker(tmp_path / "src") as src:
        with KafkaClient(src.bootstrap) as source:
            produced = _fill(source)
        dst = BrokerProcess(tmp_path / "dst").start()
        try:
            command = [sys.executable, "-m", "mirror.cli", "run", "--source", src.bootstrap, "--destination",
                       dst.bootstrap, "--topics", "events", "--checkpoint", str(tmp_path / "ck"), "--delivery",
                       "exactly-once", "--max-records-per-trigger", str(max(RECORDS // 20, 1000)), "--once",
                       "--transaction-timeout", "20"]
            env = {**os.environ, "PYTHONUNBUFFERED": "1"}
            log_path = tmp_path / "run.log"
            with open(log_path, "w") as log_file:
                job = subprocess.Popen(command, stderr=log_file, stdout=subprocess.DEVNULL, env=env,
                                       start_new_session=True)
                deadline = time.monotonic() + 180
                while "records," not in log_path.read_text() and job.poll() is None and time.monotonic() < deadline:
                    time.sleep(0.2)
                time.sleep(rng.uniform(0.0, 1.5))
                dst.kill()  # in the middle of some task's transaction
                dst = BrokerProcess(tmp_path / "dst", port=dst.port).start()
                job.wait(600)
            if job.returncode != 0:  # the outage outlasted the job's retries: run it again
                again = subprocess.run(command, capture_output=True, text=True, env=env, timeout=900)
                assert again.returncode == 0, again.stderr[-3000:]
            copied = _read_committed(dst.bootstrap)
        finally:
            dst.kill()
    for p in range(PARTITIONS):
        assert copied[p] == produced[p], f"events/{p}: {len(copied[p])} records, {len(produced[p])} at the source"
