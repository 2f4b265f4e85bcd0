"""``kmirror verify`` (issue 52), run as a user runs it (on the test's Spark session, bad input in
a process of its own), against what a real ``kmirror run`` left:
a clean mirror (its record counts are librdkafka's reading of the source), the same mirror
after the source's log cleaner removed copied records (reported as no longer at the source, no
failure, as many as librdkafka no longer reads there), and bad input (one line, exit 2). The
verdicts on edited destinations are tests/verify/test_verify_compare.py's; a live job, and
records another producer wrote into its destination, are tests/realkafka/test_real_verify.py's
(on real Kafka and on the embedded broker)."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest
from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, AlterConfigOpType, ConfigEntry, ConfigResource
from librdkafka_reader import read_values
from in_process import kmirror

from mirror.broker import EmbeddedBroker
from mirror.config import load_config
from mirror.kafka import KafkaClient, NewTopic

pytestmark = pytest.mark.slow

PARTITIONS = 2


def _verify(src: str, dst: str, topic: str, *flags: str) -> subprocess.CompletedProcess:
    """``kmirror verify``, its verdicts on this process's Spark (:mod:`in_process`)."""
    return kmirror("verify", "--source", src, "--destination", dst, "--topics", topic, "--master", "local[2]", *flags)


def _verify_process(src: str, dst: str, topic: str, *flags: str) -> subprocess.CompletedProcess:
    """``kmirror verify`` as an operator runs it: its exit code, its one line on stderr."""
    return subprocess.run([sys.executable, "-m", "mirror.cli", "verify", "--source", src, "--destination", dst,
                           "--topics", topic, "--master", "local[2]", *flags],
                          capture_output=True, text=True, timeout=300)


def _offsets(bootstrap: str, topic: str) -> dict[int, list[int]]:
    return read_values(bootstrap, topic, PARTITIONS, take=lambda m: m.offset())


def test_a_clean_mirror_then_one_whose_source_was_compacted(tmp_path):
    from mirror.spark.job import run_mirror

    with EmbeddedBroker(tmp_path / "src") as src, EmbeddedBroker(tmp_path / "dst") as dst, \
            KafkaClient(src.bootstrap) as source, KafkaClient(dst.bootstrap) as destination:
        # Compacted only after the copy: the broker's own cleaner would clean it sooner.
        source.create_topics([NewTopic("accounts", PARTITIONS, configs={"segment.bytes": "4000"})])
        destination.create_topics([NewTopic("accounts", PARTITIONS)])  # found: kept, not compacted
        # Batches of 10 records, well under a segment (a broker refuses a batch larger than segment.bytes).
        producer = Producer({"bootstrap.servers": src.bootstrap, "linger.ms": 5, "batch.num.messages": 10,
                             "partitioner": "murmur2_random"})
        for i in range(600):
            producer.produce("accounts", key=b"account-%d" % (i % 30), value=b"balance %d" % i,
                             headers=[("n", b"%d" % i)] if i % 3 else None)
        assert producer.flush(30) == 0
        copied = _offsets(src.bootstrap, "accounts")
        run_mirror(load_config(None, {"source.bootstrap": src.bootstrap, "destination.bootstrap": dst.bootstrap,
                                      "topics": "accounts", "once": True, "name": "v",
                                      "checkpoint": str(tmp_path / "ck")}))
        clean = _verify(src.bootstrap, dst.bootstrap, "accounts", "--name", "v")
        assert clean.returncode == 0, clean.stderr
        # 600 source records compared, and as many at the destination, all a consumer reads there.
        assert sum(map(len, copied.values())) == 600
        (verdict,) = [line.split() for line in clean.stdout.splitlines() if line.startswith("accounts ->")]
        assert verdict == ["accounts", "->", "accounts", "600", "600", "exact;", "compared", "600", "of", "600"]
        assert "FIRST-OFFSET" not in clean.stdout and "not covered" not in clean.stdout

        admin = AdminClient({"bootstrap.servers": src.bootstrap})
        compacted = {"cleanup.policy": "compact", "min.cleanable.dirty.ratio": "0.01"}
        (altered,) = admin.incremental_alter_configs([ConfigResource("topic", "accounts", incremental_configs=[
            ConfigEntry(name, value, incremental_operation=AlterConfigOpType.SET)
            for name, value in compacted.items()])]).values()
        altered.result(30)
        for i in range(300):  # new values for every key, so the cleaner drops what was copied
            producer.produce("accounts", key=b"account-%d" % (i % 30), value=b"later %d" % i)
        assert producer.flush(30) == 0
        while src.cleaner.clean_once() is not None:
            pass
        left = _offsets(src.bootstrap, "accounts")
        gone = sum(len(set(copied[p]) - set(left[p])) for p in range(PARTITIONS))
        assert gone > 0
        compacted = _verify(src.bootstrap, dst.bootstrap, "accounts", "--name", "v", "--json")
        assert compacted.returncode == 0, compacted.stderr
        (report,) = json.loads(compacted.stdout)
        assert {f["kind"] for f in report["findings"]} == {"gone"}
        assert sum(f["count"] for f in report["findings"]) == gone
        assert report["source_records"] == 600 - gone


def test_bad_input_is_one_line_and_exit_2(tmp_path):
    with EmbeddedBroker(tmp_path / "dst") as dst, EmbeddedBroker(tmp_path / "src") as src:
        unknown = _verify_process(src.bootstrap, dst.bootstrap, "t", "--name", "nope")
        bad_time = _verify_process(src.bootstrap, dst.bootstrap, "t", "--name", "nope", "--from-time", "yesterday")
    assert unknown.returncode == 2 and unknown.stderr.count("\n") == 1, unknown.stderr
    assert "no job nope on the destination" in unknown.stderr
    assert bad_time.returncode == 2 and "expected an ISO-8601 time" in bad_time.stderr
