"""A long-running ``kmirror run`` between two three-broker Kafka clusters (replication factor 3,
``min.insync.replicas=2``) while a librdkafka producer writes steadily and brokers of both
clusters are killed (SIGKILL) and stopped (SIGTERM, a controlled shutdown that moves leaders
away first), then started again, one at a time. Real leader moves: NOT_LEADER_OR_FOLLOWER,
FENCED_LEADER_EPOCH and the transaction coordinator moving, as Kafka answers them.

librdkafka's read_committed consumer then reads both clusters: the destination must hold the
source's records, partition by partition, complete, in order, none twice.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time

import pytest
from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewTopic

from librdkafka_reader import read_values
from sizes import size

pytestmark = [pytest.mark.slow, pytest.mark.interop]

TOPIC = "moving"
PARTITIONS = 4
SETTLE_S = 4.0
FAULTS = size("leader_moves").faults
"""Each kind of fault on each cluster once at CI size (4); issue 34's five under --acceptance."""


class SteadyProducer:
    """librdkafka's idempotent producer, about 500 records a second, until stopped: through
    leader moves it retries without duplicating or reordering the source. (The faults are the
    point, not the volume: more records only make the final reads longer.)"""

    def __init__(self, bootstrap: str):
        self.producer = Producer({"bootstrap.servers": bootstrap, "enable.idempotence": True, "acks": "all",
                                  "compression.type": "lz4", "linger.ms": 5})
        self.stop = threading.Event()
        self.errors: list[str] = []

    def run(self) -> None:
        n = 0
        while not self.stop.is_set():
            for _ in range(50):
                self.producer.produce(TOPIC, value=b"r-%08d" % n, partition=n % PARTITIONS,
                                      on_delivery=self._delivered)
                n += 1
            self.producer.poll(0)
            time.sleep(0.1)  # poll(timeout) returns at once when deliveries are waiting
        assert self.producer.flush(120) == 0

    def _delivered(self, error, _message) -> None:
        if error is not None:
            self.errors.append(str(error))


def _wait_for(predicate, timeout_s: float, what: str) -> None:
    deadline = time.monotonic() + timeout_s
    while not predicate():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(1.0)


def test_leader_moves_and_broker_restarts_on_both_clusters_lose_and_duplicate_nothing(start_kafka, tmp_path):
    src, dst = start_kafka(nodes=3), start_kafka(nodes=3)
    admin = AdminClient({"bootstrap.servers": src.bootstrap})
    for future in admin.create_topics([NewTopic(TOPIC, PARTITIONS)]).values():
        future.result(30)
    producer = SteadyProducer(src.bootstrap)
    writer = threading.Thread(target=producer.run)
    log_path = tmp_path / "job.log"
    job = None
    writer.start()
    try:
        with open(log_path, "w") as log_file:
            job = subprocess.Popen(
                [sys.executable, "-m", "mirror.cli", "run", "--source", src.bootstrap, "--destination", dst.bootstrap,
                 "--topics", TOPIC, "--checkpoint", str(tmp_path / "ck"), "--trigger-interval", "0.5",
                 "--spark-conf", "spark.driver.memory=512m"],
                stderr=log_file, stdout=subprocess.DEVNULL, env={**os.environ, "PYTHONUNBUFFERED": "1"},
                start_new_session=True)
        _wait_for(lambda: "records," in log_path.read_text() or job.poll() is not None, 240, "the first micro-batch")
        faults = ((src, 1, "kill"), (dst, 2, "kill"), (dst, 3, "stop"), (src, 3, "stop"), (dst, 1, "kill"))
        for cluster, node, how in faults[:FAULTS]:
            if how == "kill":
                cluster.kill(node)
            else:
                cluster.node(node).process.send_signal(signal.SIGTERM)
                cluster.node(node).process.wait(60)
            time.sleep(SETTLE_S)
            cluster.start_node(node)
            time.sleep(SETTLE_S)
            assert job.poll() is None, "kmirror run exited:\n" + log_path.read_text()[-3000:]
        producer.stop.set()
        writer.join(180)
        assert not producer.errors, producer.errors[:5]
        expected = read_values(src.bootstrap, TOPIC, PARTITIONS)
        total = sum(map(len, expected.values()))
        _wait_for(lambda: sum(map(len, read_values(dst.bootstrap, TOPIC, PARTITIONS).values())) >= total
                  or job.poll() is not None, 300, "the destination to catch up")
        job.send_signal(signal.SIGTERM)
        assert job.wait(120) == 0, log_path.read_text()[-3000:]
        copied = read_values(dst.bootstrap, TOPIC, PARTITIONS)
    finally:
        producer.stop.set()
        if job is not None and job.poll() is None:
            os.killpg(job.pid, signal.SIGKILL)
    for p in range(PARTITIONS):
        duplicated = len(copied[p]) - len(set(copied[p]))
        lost = len(set(expected[p]) - set(copied[p]))
        assert (lost, duplicated) == (0, 0), f"{TOPIC}/{p}: {lost} lost, {duplicated} duplicated"
        assert copied[p] == expected[p], f"{TOPIC}/{p}: out of order"
    assert total > 5_000
    assert not [line for line in log_path.read_text().splitlines() if "Traceback" in line]
