"""The disaster-recovery round trip of issue 71 on real Kafka 4.4 (Java's idempotent producer)
and on the embedded broker, each command run as an operator runs it:

1. ``kmirror run`` A -> B, exactly-once, while a group reads at A and commits; A then takes a
   tail the job never copies, and A's broker is lost (SIGKILL on Kafka).
   Each job that copies (the A -> B job in phases 1 and 5, the failback in phase 3) is
   SIGKILLed once as it copies, and started again.
2. ``kmirror failover``: the producer and the group move to B and go on.
3. A comes back; ``kmirror failback`` runs while the producer goes on writing at B.
4. The producer stops; ``kmirror failback --finish``; the producer and the group move back to A.
5. ``kmirror run`` A -> B goes on, with its old checkpoint, while the producer writes at A.

The verdicts are librdkafka's (read_committed): A holds every acknowledged record once, in
order per partition (so per key); B holds all of them but A's unreplicated tail, which the
failback reports with its exact offsets, or, with ``--reconcile``, all of them, the tail after
what B took before A came back; the group read every record B holds once, across the three
phases. Every step out of order is refused with exit 2 and its line.
"""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import time

import pytest
from confluent_kafka import Producer
from java_copy import java_produce
from librdkafka_reader import read_to_end, read_values
from live_source import wait_until
from sizes import size
from source_groups import consume_and_commit, group_consumer

from mirror.broker import EmbeddedBroker
from mirror.realkafka.distribution import KAFKA_4

pytestmark = [pytest.mark.slow, pytest.mark.interop, pytest.mark.timeout(1200)]

SIZE = size("failback")
PARTITIONS = 3
KEYS = 48
"""Key ``k`` is always written to partition ``k % 3``: per-partition order is per-key order."""
JOB = "dr"
TOTAL = int(SIZE.records)
A1, TAIL, B1, B2 = (int(TOTAL * share) for share in (0.4, 0.03, 0.2, 0.2))
A2 = TOTAL - A1 - TAIL - B1 - B2


class _Clusters:
    """A and B, either real Kafka (one node each) or embedded; A can be lost and brought back."""

    def __init__(self, kind: str, tmp_path, start_kafka, kafka_jars):
        self.kind = kind
        self.tmp_path = tmp_path
        if kind == "kafka":
            self.a, self.b = start_kafka(), start_kafka()
            self.jars = kafka_jars(KAFKA_4)
        else:
            # Two cluster ids, as two Kafka clusters have: provenance tells clusters by them.
            self.a = EmbeddedBroker(tmp_path / "a", cluster_id="cluster-a").start()
            self.b = EmbeddedBroker(tmp_path / "b", cluster_id="cluster-b").start()
            self.jars = None
        self.a_bootstrap, self.b_bootstrap = self.a.bootstrap, self.b.bootstrap

    def lose_a(self) -> None:
        if self.kind == "kafka":
            self.a.kill(1)  # SIGKILL, as a lost machine
        else:
            self.a.stop()

    def bring_back_a(self) -> None:
        if self.kind == "kafka":
            self.a.start_node(1)
        else:
            port = self.a.port
            self.a = EmbeddedBroker(self.tmp_path / "a", port=port, cluster_id="cluster-a").start()
        assert self.a.bootstrap == self.a_bootstrap

    def stop(self) -> None:
        for cluster in (self.a, self.b):
            cluster.stop()


def _records(phase: str, count: int, first: int) -> list[tuple[int, bytes, bytes]]:
    """``count`` keyed records: (partition, key, value), numbered on from ``first``."""
    out = []
    for i in range(first, first + count):
        key = i % KEYS
        out.append((key % PARTITIONS, b"k%02d" % key, b"%s-%07d" % (phase.encode(), i)))
    return out


def _produce(clusters: _Clusters, bootstrap: str, records: list[tuple[int, bytes, bytes]],
             topic: str = "orders") -> None:
    """Every record acknowledged: by Java's idempotent producer on Kafka, librdkafka's on the embedded broker."""
    if clusters.jars is not None:
        now_ms = int(time.time() * 1000)
        java_produce(clusters.jars, bootstrap, topic, [(p, k, v, now_ms, ()) for p, k, v in records],
                     compression="lz4")
        return
    producer = Producer({"bootstrap.servers": bootstrap, "enable.idempotence": True, "linger.ms": 5,
                         "compression.type": "lz4"})
    for partition, key, value in records:
        while True:
            try:
                producer.produce(topic, value, key, partition=partition)
                break
            except BufferError:  # librdkafka's queue is full: let it send some first
                producer.poll(0.5)
    assert producer.flush(120) == 0


def _by_partition(records: list[tuple[int, bytes, bytes]]) -> dict[int, list[bytes]]:
    out: dict[int, list[bytes]] = {p: [] for p in range(PARTITIONS)}
    for partition, _, value in records:
        out[partition].append(value)
    return out


def _joined(*parts: dict[int, list[bytes]]) -> dict[int, list[bytes]]:
    return {p: [value for part in parts for value in part[p]] for p in range(PARTITIONS)}


def _kmirror(*argv: str, timeout: float = 300) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "mirror.cli", *argv], capture_output=True, text=True,
                          timeout=timeout)


def _options(clusters: _Clusters, tmp_path) -> list[str]:
    return ["--source", clusters.a_bootstrap, "--destination", clusters.b_bootstrap, "--topics", "orders|refunds",
            "--name", JOB, "--checkpoint", str(tmp_path / "ck"), "--groups", "billing", "--master", "local[2]"]


_STARTED: list[subprocess.Popen] = []


@pytest.fixture(autouse=True)
def _no_job_outlives_its_test():
    """A test that fails leaves no job behind, waiting out its lost clusters for ever."""
    yield
    while _STARTED:
        job = _STARTED.pop()
        if job.poll() is None:
            job.kill()
            job.wait(30)


def _start(command: str, options: list[str], log_path) -> subprocess.Popen:
    with open(log_path, "a") as log_file:
        job = subprocess.Popen([sys.executable, "-m", "mirror.cli", command, *options, "--trigger-interval", "1"],
                               stdout=subprocess.DEVNULL, stderr=log_file)
    _STARTED.append(job)
    return job


def _killed_once(job: subprocess.Popen, command: str, options: list[str], log_path, bootstrap: str,
                 before: int) -> subprocess.Popen:
    """``job`` SIGKILLed once ``bootstrap`` holds more than ``before`` records of ``orders`` (it
    has begun copying; the copy may be over by then), and started again."""
    wait_until(lambda: job.poll() is not None or _count(bootstrap) > before, f"a first copy into {bootstrap}", 120,
               poll_s=0.2)
    assert job.poll() is None, log_path.read_text()[-3000:]
    job.kill()
    assert job.wait(60) == -signal.SIGKILL
    return _start(command, options, log_path)


def _count(bootstrap: str) -> int:
    return sum(map(len, read_values(bootstrap, "orders", PARTITIONS).values()))


def _until_holds(job: subprocess.Popen, bootstrap: str, expected: dict[int, list[bytes]], log_path) -> None:
    wait_until(lambda: job.poll() is not None or read_values(bootstrap, "orders", PARTITIONS) == expected,
               f"every record at {bootstrap}", 300, poll_s=1)
    assert job.poll() is None, log_path.read_text()[-3000:]


def _stop(job: subprocess.Popen, log_path) -> None:
    job.send_signal(signal.SIGTERM)
    try:
        assert job.wait(180) == 0, log_path.read_text()[-3000:]
    finally:
        if job.poll() is None:
            job.kill()


def _refused(done: subprocess.CompletedProcess, line: str) -> None:
    assert done.returncode == 2, done
    assert line in done.stderr and "Traceback" not in done.stderr, done.stderr[-3000:]


def _create(bootstrap: str, topic: str, partitions: int) -> None:
    from kafka.admin import KafkaAdminClient, NewTopic

    admin = KafkaAdminClient(bootstrap_servers=bootstrap, request_timeout_ms=10_000)
    try:
        admin.create_topics([NewTopic(topic, partitions, 1)])
    finally:
        admin.close()


def _refunds(phase: str, count: int) -> list[tuple[int, bytes, bytes]]:
    return [(0, b"r%d" % (i % 7), b"%s-%05d" % (phase.encode(), i)) for i in range(count)]


def _tail_rows(stdout: str) -> dict[int, tuple[int, int, int, str]]:
    lines = [line.split() for line in stdout.splitlines()]
    header = lines.index(["TOPIC", "PARTITION", "FROM", "TO", "UNREPLICATED", "AT-DESTINATION"])
    return {int(line[1]): (int(line[2]), int(line[3]), int(line[4]), line[5]) for line in lines[header + 1:]
            if line[:1] == ["orders"] and len(line) == 6}


@pytest.mark.parametrize("kind, reconcile", [("kafka", True), ("kafka", False), ("embedded", True)])
def test_a_failover_and_a_failback_lose_nothing_copy_nothing_twice_and_move_the_group_exactly(
        kind, reconcile, tmp_path, start_kafka, kafka_jars):
    clusters = _Clusters(kind, tmp_path, start_kafka, kafka_jars)
    options = _options(clusters, tmp_path)
    try:
        _create(clusters.a_bootstrap, "orders", PARTITIONS)
        written = _records("a1", A1, 0)
        _produce(clusters, clusters.a_bootstrap, written)
        a1 = _by_partition(written)
        _refused(_kmirror("failback", *options), f"job {JOB} never failed over: a failback copies home")

        # Phase 1: A is primary, the job copies it to B while the group reads at A.
        log_path = tmp_path / "run.log"
        job = _killed_once(_start("run", options, log_path), "run", options, log_path, clusters.b_bootstrap, 0)
        _until_holds(job, clusters.b_bootstrap, a1, log_path)
        read = [consume_and_commit(clusters.a_bootstrap, "billing", "orders", PARTITIONS, A1 // 2)]
        _stop(job, log_path)  # its last group translation commits the group's offsets at B
        tail = _by_partition(_records("tail", TAIL, A1))
        _produce(clusters, clusters.a_bootstrap, _records("tail", TAIL, A1))
        clusters.lose_a()

        # Phase 2: B is primary.
        done = _kmirror("failover", *options)
        assert done.returncode == 0, done
        assert "recovery point: the source does not answer: unknown" in done.stdout, done.stdout
        shown = _kmirror("status", *options)
        assert shown.returncode == 0, shown
        assert shown.stdout.startswith("primary: the destination, since the failover at"), shown.stdout
        assert "failback: the source does not answer" in shown.stdout, shown.stdout
        b1 = _by_partition(_records("b1", B1, A1 + TAIL))
        _produce(clusters, clusters.b_bootstrap, _records("b1", B1, A1 + TAIL))
        # Everything B holds: the group is past the promotion point in every partition.
        read.append(consume_and_commit(clusters.b_bootstrap, "billing", "orders", PARTITIONS, A1 - A1 // 2 + B1))
        _refused(_kmirror("run", *options, "--once"), f"job {JOB} was failed over to the destination")
        # A topic made at B while it is primary: B's own from its log start.
        _create(clusters.b_bootstrap, "refunds", 1)
        _produce(clusters, clusters.b_bootstrap, _refunds("at-b", 300), "refunds")

        # Phase 3: A is back; the failback copies B's own records home while B takes more.
        clusters.bring_back_a()
        failback_log = tmp_path / "failback.log"
        failing_back = [*options, *(["--reconcile"] if reconcile else [])]
        failback = _killed_once(_start("failback", failing_back, failback_log), "failback", failing_back, failback_log,
                                clusters.a_bootstrap, A1 + TAIL)
        _until_holds(failback, clusters.a_bootstrap, _joined(a1, tail, b1), failback_log)
        b2 = _by_partition(_records("b2", B2, A1 + TAIL + B1))
        _produce(clusters, clusters.b_bootstrap, _records("b2", B2, A1 + TAIL + B1))
        _until_holds(failback, clusters.a_bootstrap, _joined(a1, tail, b1, b2), failback_log)
        _refused(_kmirror("failback", *options, "--finish"), f"job {JOB}-failback still runs")
        shown = _kmirror("status", *options, "--json")
        assert shown.returncode == 0, shown
        assert json.loads(shown.stdout)["primary"]["cluster"] == "destination"
        assert [(t["topic"], t["lag"]) for t in json.loads(shown.stdout)["failback"]["topics"]] == [("orders", 0), ("refunds", 0)]
        _refused(_kmirror("run", *options, "--once"), f"job {JOB} was failed over to the destination")
        wait_until(lambda: read_values(clusters.a_bootstrap, "refunds", 1) == {0: [v for _, _, v in _refunds("at-b", 300)]},
                   "the topic made at B copied home", 120, poll_s=1)
        _stop(failback, failback_log)
        # Everything B holds again: a group inside the reconciled tail at B has read B's records
        # that follow it at A, and would read them again there (docs/operations.md).
        read.append(consume_and_commit(clusters.b_bootstrap, "billing", "orders", PARTITIONS,
                                       B2 + (TAIL if reconcile else 0)))

        # Phase 4: the producer has stopped; A is primary again.
        done = _kmirror("failback", *options, "--finish")
        assert done.returncode == 0, done
        assert _tail_rows(done.stdout) == {p: (len(a1[p]), len(a1[p]) + len(tail[p]), len(tail[p]),
                                               "yes" if reconcile else "no") for p in range(PARTITIONS)}, done.stdout
        assert f"the source's unreplicated tail: {TAIL} offsets of {PARTITIONS} partitions" in done.stdout
        assert (f"{TAIL} offsets of {PARTITIONS} partitions copied into the destination since (--reconcile)" if reconcile
                else f"{TAIL} offsets of {PARTITIONS} partitions stay on the source only") in done.stdout
        assert f"job {JOB} failed back at" in done.stdout, done.stdout
        _refused(_kmirror("failback", *options), f"job {JOB} failed back at")
        shown = _kmirror("status", *options)
        assert shown.stdout.startswith("primary: the source, again since the failback at"), shown.stdout
        a2 = _by_partition(_records("a2", A2, A1 + TAIL + B1 + B2))

        # Phase 5: the job A -> B goes on from its old checkpoint, past what the failback wrote,
        # while the producer writes at A again.
        job = _start("run", options, log_path)
        before = _count(clusters.b_bootstrap)
        _produce(clusters, clusters.a_bootstrap, _records("a2", A2, A1 + TAIL + B1 + B2))
        job = _killed_once(job, "run", options, log_path, clusters.b_bootstrap, before)
        _produce(clusters, clusters.a_bootstrap, _refunds("at-a", 200), "refunds")
        refunds = {0: [v for _, _, v in _refunds("at-b", 300) + _refunds("at-a", 200)]}
        wait_until(lambda: job.poll() is not None or read_values(clusters.b_bootstrap, "refunds", 1) == refunds,
                   "the topic made at B mirrored from A again", 300, poll_s=1)
        # Reconciled, the tail reached B when the failback started: after what B took by then.
        at_b = _joined(a1, b1, tail, b2, a2) if reconcile else _joined(a1, b1, b2, a2)
        _until_holds(job, clusters.b_bootstrap, at_b, log_path)
        _stop(job, log_path)
        assert read_values(clusters.a_bootstrap, "orders", PARTITIONS) == _joined(a1, tail, b1, b2, a2)
        assert read_values(clusters.b_bootstrap, "orders", PARTITIONS) == at_b
        assert read_values(clusters.a_bootstrap, "refunds", 1) == read_values(clusters.b_bootstrap, "refunds", 1) == refunds
        consumer = group_consumer(clusters.a_bootstrap, "billing")
        consumer.subscribe(["orders"])
        try:
            read.append(read_to_end(consumer, "orders", PARTITIONS))
        finally:
            consumer.close()
        assert _joined(*read) == at_b
    finally:
        clusters.stop()
