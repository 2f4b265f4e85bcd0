"""A source topic being written while a test copies it, and waiting on what a copy shows.

Resident copiers follow their partitions between micro-batches, so the tests of copy-ahead,
fencing and crashes need a source that keeps growing under them: :class:`Writer` produces
unique values (``p<partition>-<n>``) from a thread and keeps what it wrote, in order, for
the test to compare with what librdkafka reads at the destination. :class:`ProducerWriter`
does the same with librdkafka's producer and keys, as an application writes a real cluster.
"""

from __future__ import annotations

import signal
import threading
import time
from typing import Callable

import kcodecs
from kcodecs import Record
from mirror.kafka import KafkaClient, TopicPartition


class Writer:
    """10 unique records to every one of ``partitions`` every ``pause_s``, until stopped:
    ``with Writer(bootstrap, topic, partitions) as writer: ...``, then ``writer.written``."""

    def __init__(self, bootstrap: str, topic: str, partitions: int, pause_s: float = 0.02):
        self.bootstrap, self.topic, self.partitions, self.pause_s = bootstrap, topic, partitions, pause_s
        self.written: dict[int, list[bytes]] = {p: [] for p in range(partitions)}
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self.run)

    def run(self) -> None:
        with KafkaClient(self.bootstrap) as client:
            n = 0
            while not self.stop.is_set():
                for p in range(self.partitions):
                    values = [b"p%d-%07d" % (p, n + i) for i in range(10)]
                    batch = kcodecs.build_batch([Record(value=v, timestamp=int(time.time() * 1000)) for v in values],
                                                compression="lz4")
                    client.produce([(TopicPartition(self.topic, p), batch)])
                    self.written[p] += values
                n += 10
                time.sleep(self.pause_s)

    def __enter__(self) -> "Writer":
        self.thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self.stop.set()
        self.thread.join(30)


class ProducerWriter:
    """librdkafka's idempotent producer writing keyed records ``<partition>-<n>`` to every one of
    ``partitions`` from a thread, a few hundred a second, as an application keeps writing while
    its mirror runs or is switched; ``written`` in order per partition."""

    def __init__(self, bootstrap: str, topic: str, partitions: int, **conf):
        """``conf``: more librdkafka properties (``security.protocol`` and the like)."""
        from confluent_kafka import Producer

        self.producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5, "enable.idempotence": True,
                                  "compression.type": "lz4", **conf})
        self.topic, self.partitions = topic, partitions
        self.written: dict[int, list[bytes]] = {p: [] for p in range(partitions)}
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self._run)

    def _run(self) -> None:
        n = 0
        while not self.stop.is_set():
            for p in range(self.partitions):
                value = b"%d-%06d" % (p, n)
                self.producer.produce(self.topic, value, key=b"k%d" % (n % 7), partition=p)
                self.written[p].append(value)
            n += 1
            if n % 20 == 0:
                self.producer.poll(0)
                time.sleep(0.05)
        assert self.producer.flush(30) == 0

    def __enter__(self) -> "ProducerWriter":
        self.thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self.finish()

    def finish(self) -> dict[int, list[bytes]]:
        """Stop writing, wait for every record to be acknowledged, and give what was written."""
        if not self.stop.is_set():
            self.stop.set()
            self.thread.join(60)
        return self.written


def copy_live_then_sigterm(job, writer: ProducerWriter, copied: Callable[[], dict[int, list[bytes]]]) -> str:
    """A running ``kmirror run`` (``job``, stderr piped) copies what ``writer`` writes (500
    records a partition at least) until ``copied()`` (an independent reader of the destination)
    shows every record; then a SIGTERM. Returns the job's stderr, having checked that it exited
    0 on its own terms, with no traceback and no ERROR line."""
    try:
        with writer:
            wait_until(lambda: job.poll() is not None or len(writer.written[0]) >= 500, "the live stream", 60)
        wait_until(lambda: job.poll() is not None or copied() == writer.written, "the job to copy the live stream",
                   180, poll_s=1.0)
        assert job.poll() is None, "the job ended on its own"
        job.send_signal(signal.SIGTERM)
        _, stderr = job.communicate(timeout=120)
    finally:
        if job.poll() is None:
            job.kill()
    assert job.returncode == 0, stderr[-5000:]
    assert "Traceback" not in stderr and " ERROR " not in stderr, stderr[-5000:]
    return stderr


def wait_until(predicate, what: str, timeout_s: float, poll_s: float = 0.1) -> None:
    """Poll ``predicate`` until it holds; fail naming ``what`` after ``timeout_s``."""
    deadline = time.monotonic() + timeout_s
    while not predicate():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(poll_s)


def _status(source: str, destination: str, topics: str, job: str, *flags: str):
    import subprocess
    import sys

    return subprocess.run([sys.executable, "-m", "mirror.cli", "status", "--source", source, "--destination",
                           destination, "--topics", topics, "--name", job, *flags],
                          capture_output=True, text=True, timeout=60)


def committed_everywhere(source: str, destination: str, topics: str, job: str) -> bool:
    """Whether ``kmirror status`` shows that job ``job`` has committed a copy of records of
    every partition of ``topics`` (a regex): a cheap wait (no Spark) before a check that needs
    a first commit."""
    import json

    answer = _status(source, destination, topics, job, "--json")
    if answer.returncode != 0:
        return False
    topics = json.loads(answer.stdout)["topics"]
    return bool(topics) and all(p["mirrored_to"] for t in topics for p in t["partitions"])


def caught_up(source: str, destination: str, topics: str, job: str) -> bool:
    """Whether ``kmirror status`` shows job ``job`` has committed every record of ``topics``."""
    return _status(source, destination, topics, job, "--max-lag", "0").returncode == 0
