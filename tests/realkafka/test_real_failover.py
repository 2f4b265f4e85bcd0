"""``kmirror failover`` (issue 71, step 1), on real Kafka 4.4 and on the embedded broker, run as
an operator runs it, after a long-running exactly-once ``kmirror run`` A -> B.

- With A still answering: it is refused while the job runs; once the job is stopped it records
  B's ends as the promotion points, prints per partition what A holds that never reached B,
  commits the group's translated offsets at B, and refuses a second failover and the job's
  ``run`` after it.
- With A gone (its broker killed): refused while the job runs, then, once the job stopped, the
  same promotion with the recovery point "unknown". A job killed outright counts as running
  until its presence lapses (30 s, and its copiers' lease), and the refusal says how long is
  left.

- Routed by key (a destination topic the user made smaller): the group's rows say
  "conservative", and at B it may re-read records and skips none.

Every verdict is librdkafka's: the watermarks of both clusters, the failover's record on B, the
records the group reads at B after the failover (exactly those it had not consumed at A: none
twice, none skipped).
"""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import time

import pytest
from confluent_kafka import Consumer, Producer
from confluent_kafka import TopicPartition as CTP
from librdkafka_reader import read_to_end, read_values
from live_source import wait_until
from source_groups import consume_and_commit, fill, group_consumer

from mirror.broker import EmbeddedBroker

pytestmark = [pytest.mark.slow, pytest.mark.interop, pytest.mark.timeout(600)]

PARTITIONS = 3
PER_PARTITION = 2_000
TAIL = 100
CONSUMED = 2_500
JOB = "dr"
LEASE_S = 10


def _clusters(kind: str, tmp_path, start_kafka) -> list:
    if kind == "kafka":
        return [start_kafka(), start_kafka()]
    return [EmbeddedBroker(tmp_path / "a").start(), EmbeddedBroker(tmp_path / "b").start()]


def _kmirror(*argv: str, timeout: float = 180) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "mirror.cli", *argv], capture_output=True, text=True,
                          timeout=timeout)


def _options(a: str, b: str, tmp_path) -> list[str]:
    return ["--source", a, "--destination", b, "--topics", "orders", "--name", JOB,
            "--checkpoint", str(tmp_path / "ck")]


def _start(a: str, b: str, tmp_path, *more: str) -> tuple[subprocess.Popen, object]:
    log_path = tmp_path / "run.log"
    with open(log_path, "w") as log_file:
        job = subprocess.Popen([sys.executable, "-m", "mirror.cli", "run", *_options(a, b, tmp_path),
                                "--trigger-interval", "1", "--master", "local[2]", *more],
                               stdout=subprocess.DEVNULL, stderr=log_file)
    return job, log_path


def _wait_copied(job, b: str, produced, log_path) -> None:
    wait_until(lambda: job.poll() is not None or read_values(b, "orders", PARTITIONS) == produced,
               "every record at the destination", 240, poll_s=1)
    assert job.poll() is None, log_path.read_text()[-3000:]


def _high_watermarks(bootstrap: str) -> dict[int, int]:
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "watermarks"})
    try:
        return {p: consumer.get_watermark_offsets(CTP("orders", p), timeout=30)[1] for p in range(PARTITIONS)}
    finally:
        consumer.close()


def _tables(stdout: str) -> tuple[dict[int, dict[str, str]], dict[int, int]]:
    """The recovery table's rows by partition, and the promotion points by partition."""
    lines = [line.split() for line in stdout.splitlines()]
    recovery = lines.index(["TOPIC", "PARTITION", "COPIED-TO", "SOURCE-END", "NOT-COPIED"])
    promotion = lines.index(["DESTINATION-TOPIC", "PARTITION", "PROMOTION-POINT"])
    rows = {int(line[1]): dict(zip(lines[recovery], line)) for line in lines[recovery + 1:promotion]
            if line[:1] == ["orders"]}
    points = {int(line[1]): int(line[2]) for line in lines[promotion + 1:] if line[:1] == ["orders"]}
    return rows, points


def _recorded(b: str) -> dict:
    """The failover's record on B, read by librdkafka: the last value of key "state"."""
    consumer = Consumer({"bootstrap.servers": b, "group.id": "unused", "enable.partition.eof": True,
                         "isolation.level": "read_committed"})
    consumer.assign([CTP(f"kmirror-flow.{JOB}", 0, 0)])
    try:
        state = [m.value() for m in read_to_end(consumer, f"kmirror-flow.{JOB}", 1, lambda m: m)[0]
                 if m.key() == b"state"][-1]
    finally:
        consumer.close()
    return json.loads(state)


def _refused(done: subprocess.CompletedProcess, line: str) -> None:
    assert done.returncode == 2, done
    assert line in done.stderr and "Traceback" not in done.stderr, done.stderr


@pytest.mark.parametrize("kind", ["kafka", "embedded"])
def test_a_failover_with_the_source_up_promotes_the_destination_and_says_what_never_reached_it(
        kind, tmp_path, start_kafka):
    clusters = _clusters(kind, tmp_path, start_kafka)
    a, b = (cluster.bootstrap for cluster in clusters)
    try:
        produced = fill(a, "orders", PARTITIONS, PER_PARTITION)
        consumed = consume_and_commit(a, "billing", "orders", PARTITIONS, CONSUMED)
        job, log_path = _start(a, b, tmp_path)
        try:
            _wait_copied(job, b, produced, log_path)
            _refused(_kmirror("failover", *_options(a, b, tmp_path), "--groups", "billing"),
                     f"job {JOB} still runs")
            job.send_signal(signal.SIGTERM)
            assert job.wait(120) == 0, log_path.read_text()[-3000:]
        finally:
            if job.poll() is None:
                job.kill()
        producer = Producer({"bootstrap.servers": a, "enable.idempotence": True})
        for p in range(PARTITIONS):
            for i in range(TAIL):
                producer.produce("orders", b"tail-p%d-%05d" % (p, i), partition=p)
        assert producer.flush(30) == 0
        source_ends, promotion = _high_watermarks(a), _high_watermarks(b)

        done = _kmirror("failover", *_options(a, b, tmp_path), "--groups", "billing")
        assert done.returncode == 0, done
        rows, points = _tables(done.stdout)
        assert {p: (row["COPIED-TO"], row["SOURCE-END"], row["NOT-COPIED"]) for p, row in rows.items()} == {
            p: (str(PER_PARTITION), str(source_ends[p]), str(TAIL)) for p in range(PARTITIONS)}
        assert points == promotion
        recorded = _recorded(b)
        assert (recorded["step"], recorded["promotion"]) == (
            "failed-over", {"orders": {str(p): promotion[p] for p in range(PARTITIONS)}})
        assert (f"recovery point: {PARTITIONS * TAIL} offsets of {PARTITIONS} partitions the source holds never "
                f"reached the destination") in done.stdout, done.stdout
        assert f"job {JOB} failed over to the destination at" in done.stdout, done.stdout
        # The group resumes at B at exactly the records it had not consumed at A.
        consumer = group_consumer(b, "billing")
        consumer.subscribe(["orders"])
        try:
            after = read_to_end(consumer, "orders", PARTITIONS)
        finally:
            consumer.close()
        assert after == {p: produced[p][len(consumed[p]):] for p in range(PARTITIONS)}

        _refused(_kmirror("failover", *_options(a, b, tmp_path)), f"job {JOB} already failed over to the destination")
        _refused(_kmirror("run", *_options(a, b, tmp_path), "--once", "--master", "local[1]"),
                 f"job {JOB} was failed over to the destination")
    finally:
        for cluster in clusters:
            cluster.stop()


@pytest.mark.parametrize("kind, stopped", [("kafka", "SIGTERM"), ("embedded", "SIGKILL")])
def test_a_failover_with_the_source_gone_promotes_the_destination_and_says_the_recovery_point_is_unknown(
        kind, stopped, tmp_path, start_kafka):
    clusters = _clusters(kind, tmp_path, start_kafka)
    a, b = (cluster.bootstrap for cluster in clusters)
    try:
        produced = fill(a, "orders", PARTITIONS, PER_PARTITION)
        job, log_path = _start(a, b, tmp_path, "--lease", str(LEASE_S))
        try:
            _wait_copied(job, b, produced, log_path)
            if kind == "kafka":
                clusters[0].kill(1)  # SIGKILL, as a lost machine
            else:
                clusters[0].stop()
            _refused(_kmirror("failover", *_options(a, b, tmp_path)), f"job {JOB} still runs")
            job.send_signal(getattr(signal, stopped))
            assert job.wait(120) == (0 if stopped == "SIGTERM" else -signal.SIGKILL), log_path.read_text()[-3000:]
        finally:
            if job.poll() is None:
                job.kill()
        promotion = _high_watermarks(b)
        if stopped == "SIGKILL":  # it never said it stopped: running until it and its copiers lapse
            began = time.monotonic()
            first = _kmirror("failover", *_options(a, b, tmp_path))
            _refused(first, "if it was killed, wait")
            wait_until(lambda: time.monotonic() - began > 30 + LEASE_S, "the presence to lapse", 90, poll_s=1)
        done = _kmirror("failover", *_options(a, b, tmp_path))
        assert done.returncode == 0, done
        rows, points = _tables(done.stdout)
        assert {p: (row["COPIED-TO"], row["SOURCE-END"], row["NOT-COPIED"]) for p, row in rows.items()} == {
            p: (str(PER_PARTITION), "-", "unknown") for p in range(PARTITIONS)}
        assert points == promotion
        assert _recorded(b)["promotion"] == {"orders": {str(p): promotion[p] for p in range(PARTITIONS)}}
        assert "recovery point: the source does not answer: unknown" in done.stdout, done.stdout
    finally:
        for cluster in clusters:
            cluster.stop()


def test_a_failover_of_a_flow_routed_by_key_says_the_groups_precision_and_skips_no_record(tmp_path, start_kafka):
    """A flow into a destination topic the user made smaller routes by key: each destination
    partition is fed by two source partitions, so a group's offsets translate conservatively
    (it re-reads some records, skips none), and the failover says so in the group's rows."""
    from kafka.admin import KafkaAdminClient, NewTopic

    clusters = [start_kafka(), start_kafka()]
    a, b = (cluster.bootstrap for cluster in clusters)
    try:
        admin = KafkaAdminClient(bootstrap_servers=a, request_timeout_ms=10_000)
        admin.create_topics([NewTopic("orders", 4, 1)])
        admin.close()
        admin = KafkaAdminClient(bootstrap_servers=b, request_timeout_ms=10_000)
        admin.create_topics([NewTopic("orders", 2, 1)])  # the user's, smaller: by-key
        admin.close()
        producer = Producer({"bootstrap.servers": a, "enable.idempotence": True, "linger.ms": 5})
        for i in range(4_000):
            producer.produce("orders", b"v-%05d" % i, b"k%03d" % (i % 97))
        assert producer.flush(30) == 0
        # The group read the first 500 records of every partition at A, and committed there.
        at_a = read_values(a, "orders", 4)
        committer = group_consumer(a, "billing")
        try:
            committer.commit(offsets=[CTP("orders", p, 500) for p in range(4)], asynchronous=False)
        finally:
            committer.close()
        consumed = {p: values[:500] for p, values in at_a.items()}
        job, log_path = _start(a, b, tmp_path)
        try:
            wait_until(lambda: job.poll() is not None or sum(map(len, read_values(b, "orders", 2).values())) == 4_000,
                       "every record at the destination", 240, poll_s=1)
            assert job.poll() is None, log_path.read_text()[-3000:]
            job.send_signal(signal.SIGTERM)
            assert job.wait(120) == 0, log_path.read_text()[-3000:]
        finally:
            if job.poll() is None:
                job.kill()
        done = _kmirror("failover", *_options(a, b, tmp_path), "--groups", "billing")
        assert done.returncode == 0, done
        lines = [line.split() for line in done.stdout.splitlines()]
        header = lines.index(["GROUP", "TOPIC", "PARTITION", "SOURCE-OFFSET", "DESTINATION-TOPIC",
                              "DESTINATION-PARTITION", "DESTINATION-OFFSET", "PRECISION", "COPIED"])
        precisions = {line[7] for line in lines[header + 1:] if line[:1] == ["billing"] and len(line) == 9}
        assert precisions == {"conservative"}, done.stdout
        consumer = group_consumer(b, "billing")
        consumer.subscribe(["orders"])
        try:
            after = read_to_end(consumer, "orders", 2)
        finally:
            consumer.close()
        read_at_a = {value for values in consumed.values() for value in values}
        read_at_b = [value for values in after.values() for value in values]
        assert len(read_at_b) == len(set(read_at_b))
        # None skipped. How many it re-reads depends on how the copy batched (records rebuilt
        # into one batch are placed at its first): conservative promises no more.
        assert read_at_a | set(read_at_b) == {b"v-%05d" % i for i in range(4_000)}
    finally:
        for cluster in clusters:
            cluster.stop()
