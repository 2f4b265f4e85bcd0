"""The Spark job's failure and lifecycle behaviour: unreachable clusters, a corrupt source batch,
SIGTERM, and a restart from the same checkpoint."""

from __future__ import annotations

import os
import re
import signal
import socket
import subprocess
import sys
import time

import pytest
from kafka import KafkaConsumer

import kcodecs
from kcodecs import Record
from mirror.broker import EmbeddedBroker
from mirror.config import load_config
from mirror.kafka import KafkaClient, NewTopic, TopicPartition
from mirror.spark.once import IncompleteCopyError, check_copied


def _closed_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def test_an_unreachable_source_exits_2_before_spark_starts(tmp_path):
    config = tmp_path / "fast-fail.toml"
    config.write_text("[retry]\nattempts = 2\ninitial_backoff_s = 0.05\n")
    began = time.monotonic()
    done = subprocess.run(
        [sys.executable, "-m", "mirror.cli", "run", "--config", str(config), "--source", f"127.0.0.1:{_closed_port()}",
         "--destination", f"127.0.0.1:{_closed_port()}", "--topics", ".*", "--checkpoint", str(tmp_path / "ck")],
        capture_output=True, text=True, timeout=120)
    assert done.returncode == 2, done.stderr
    assert "unreachable" in done.stderr and "Traceback" not in done.stderr
    assert time.monotonic() - began < 60  # retries are bounded; no JVM was started


def _produce(client: KafkaClient, topic: str, batches: int, per_batch: int = 10) -> list[bytes]:
    values = []
    for b in range(batches):
        records = [Record(key=None, value=b"%s-%d-%d" % (topic.encode(), b, i)) for i in range(per_batch)]
        client.produce([(TopicPartition(topic, 0), kcodecs.build_batch(records, compression="lz4"))])
        values += [r.value for r in records]
    return values


def _values(bootstrap: str, topic: str) -> list[bytes]:
    consumer = KafkaConsumer(topic, bootstrap_servers=bootstrap, group_id=None, consumer_timeout_ms=2000,
                             auto_offset_reset="earliest")
    values = [r.value for r in consumer]
    consumer.close()
    return values


@pytest.mark.slow
def test_a_corrupt_source_batch_fails_the_job_at_once_in_one_clean_log_line(tmp_path):
    with EmbeddedBroker(tmp_path / "src") as src, EmbeddedBroker(tmp_path / "dst") as dst:
        with KafkaClient(src.bootstrap) as source:
            source.create_topics([NewTopic("fragile", 1)])
            _produce(source, "fragile", batches=3)
        log = tmp_path / "src" / "fragile-0" / ("0" * 20 + ".log")
        data = bytearray(log.read_bytes())
        first = kcodecs.read_batch(data).size
        data[first + 80] ^= 0x55  # inside the second batch's compressed records
        log.write_bytes(data)
        done = subprocess.run(
            [sys.executable, "-m", "mirror.cli", "run", "--source", src.bootstrap, "--destination", dst.bootstrap,
             "--topics", "fragile", "--once", "--checkpoint", str(tmp_path / "ck")],
            capture_output=True, text=True, timeout=300)
    assert done.returncode == 1, done.stderr
    errors = [line for line in done.stderr.splitlines() if " ERROR " in line]
    assert len(errors) == 1, done.stderr
    assert "mirror failed: CorruptSourceError: corrupt source batch in fragile/0 at offset 10" in errors[0]
    # Neither the JVM's nor Python's stack trace; not retried by Spark, nor waited out.
    assert "Traceback" not in done.stderr and "\tat " not in done.stderr and "outage" not in done.stderr


@pytest.mark.slow
def test_sigterm_stops_after_a_micro_batch_and_a_restart_resumes_without_loss(tmp_path):
    """Tasks that copy their micro-batch's ranges and end: a rate-limited job stops mid-stream.
    (Resident copiers copy ahead of the rate limit: tests/spark/test_stop.py stops those.)"""
    with EmbeddedBroker(tmp_path / "src") as src, EmbeddedBroker(tmp_path / "dst") as dst:
        with KafkaClient(src.bootstrap) as source:
            source.create_topics([NewTopic("stream", 1)])
            produced = _produce(source, "stream", batches=40)
        command = [sys.executable, "-m", "mirror.cli", "run", "--source", src.bootstrap, "--destination",
                   dst.bootstrap, "--topics", "stream", "--checkpoint", str(tmp_path / "ck"),
                   "--max-records-per-trigger", "50", "--trigger-interval", "0.5", "--no-copy-between-micro-batches"]
        job = subprocess.Popen(command, stderr=subprocess.PIPE, text=True, env={**os.environ, "PYTHONUNBUFFERED": "1"})
        lines = []
        for line in job.stderr:  # wait for the first micro-batch's progress line
            lines.append(line)
            if re.search(r"batch \d+: \d+ records", line):
                break
        job.send_signal(signal.SIGTERM)
        _, rest = job.communicate(timeout=120)
        log_text = "".join(lines) + rest
        assert job.returncode == 0, log_text
        assert "SIGTERM received" in log_text and "kmirror copied" in log_text
        first_run = _values(dst.bootstrap, "stream")
        assert 0 < len(first_run) < len(produced)  # stopped mid-stream

        resumed = subprocess.run(command + ["--once"], capture_output=True, text=True, timeout=300)
        assert resumed.returncode == 0, resumed.stderr
        assert "--once: every one of the 1 selected partitions copied to its end" in resumed.stderr
        copied = _values(dst.bootstrap, "stream")
    # Nothing lost, and nothing twice: the stop came between micro-batches, so the restart
    # began exactly where the checkpoint's last committed micro-batch ended.
    assert copied == produced
    # --once's own check reads the checkpoint Spark wrote (issue 69): it names a partition whose
    # end lies past where the last committed micro-batch got, and one no micro-batch planned.
    stream = TopicPartition("stream", 0)
    check_copied({stream: len(produced)}, tmp_path / "ck")
    with pytest.raises(IncompleteCopyError) as short:
        check_copied({stream: len(produced) + 1, TopicPartition("other", 0): 5}, tmp_path / "ck")
    assert str(short.value) == (f"--once ended with 2 partitions of 2 topics not copied to their end: other/0 "
                                f"(never planned, end 5), stream/0 at {len(produced)} of {len(produced) + 1}")


def _eventually(read, expected, timeout_s: float = 120) -> list:
    deadline = time.monotonic() + timeout_s
    while True:
        got = read()
        if sorted(got) == sorted(expected) or time.monotonic() > deadline:
            return got
        time.sleep(0.5)


@pytest.mark.slow
def test_a_running_job_picks_up_a_new_topic_and_stops_when_asked(tmp_path):
    import threading

    from mirror.spark.job import run_mirror

    with EmbeddedBroker(tmp_path / "src") as src, EmbeddedBroker(tmp_path / "dst") as dst, \
            KafkaClient(src.bootstrap) as source:
        source.create_topics([NewTopic("live.a", 1)])
        first = _produce(source, "live.a", batches=2)
        config = load_config(None, {"source.bootstrap": src.bootstrap, "destination.bootstrap": dst.bootstrap,
                                    "topics": r"live\..*", "trigger_interval_s": 0.2,
                                    "checkpoint": str(tmp_path / "ck")})
        stop, totals = threading.Event(), []
        job = threading.Thread(target=lambda: totals.append(run_mirror(config, stop=stop)))
        job.start()
        try:
            assert _eventually(lambda: _values(dst.bootstrap, "live.a"), first) == first
            source.create_topics([NewTopic("live.b", 1)])  # appears while the query runs
            second = _produce(source, "live.b", batches=3)
            assert _eventually(lambda: _values(dst.bootstrap, "live.b"), second) == second
        finally:
            stop.set()
            job.join(120)
        assert not job.is_alive() and totals, "the job did not stop when asked"
    assert totals[0].counters.total_records == len(first) + len(second)


_WORKER_TIMEOUT = ("org.apache.spark.SparkException: Python worker failed to connect back.\n"
                   "\tat org.apache.spark.api.python.PythonWorkerFactory.createSimpleWorker")


def _failing_watch(monkeypatch, times: int) -> list:
    """Make the job's watch of its query end the query the first ``times`` times, after its
    first micro-batch, as Spark ends it when a Python worker does not connect back in time
    (it reports that through ``query.exception()``; the message is Spark's)."""
    from mirror.spark import stopping

    real_watch = stopping.Stopper.watch
    ended = []

    def watch(self, query):
        if len(ended) >= times:
            return real_watch(self, query)
        deadline = time.monotonic() + 120
        while query.lastProgress is None and time.monotonic() < deadline:
            time.sleep(0.1)
        query.stop()
        ended.append(query.id)
        raise RuntimeError(_WORKER_TIMEOUT)

    monkeypatch.setattr(stopping.Stopper, "watch", watch)
    return ended


@pytest.mark.slow
def test_a_query_ended_by_a_python_worker_start_timeout_is_started_again_from_its_checkpoint(
        tmp_path, monkeypatch, caplog):
    """Spark waits a fixed 10 s for a Python worker to connect back; on a machine whose CPU is
    taken that long, the wait fails and ends the query. The job starts it again from its
    checkpoint: the records written afterwards are copied, each once, and the restart is logged."""
    import threading

    from mirror.spark.job import run_mirror

    ended = _failing_watch(monkeypatch, times=1)
    with EmbeddedBroker(tmp_path / "src") as src, EmbeddedBroker(tmp_path / "dst") as dst, \
            KafkaClient(src.bootstrap) as source:
        source.create_topics([NewTopic("live", 1)])
        first = _produce(source, "live", batches=2)
        config = load_config(None, {"source.bootstrap": src.bootstrap, "destination.bootstrap": dst.bootstrap,
                                    "topics": "live", "trigger_interval_s": 0.2, "checkpoint": str(tmp_path / "ck")})
        stop, totals = threading.Event(), []
        job = threading.Thread(target=lambda: totals.append(run_mirror(config, stop=stop)))
        with caplog.at_level("WARNING", logger="mirror.spark.job"):
            job.start()
            try:
                assert _eventually(lambda: _values(dst.bootstrap, "live"), first) == first
                deadline = time.monotonic() + 60
                while not ended and time.monotonic() < deadline:
                    time.sleep(0.1)
                assert ended, "the query was not ended"
                second = _produce(source, "live", batches=3)
                assert _eventually(lambda: _values(dst.bootstrap, "live"), first + second) == first + second
            finally:
                stop.set()
                job.join(120)
    assert not job.is_alive() and totals, "the job did not stop when asked"
    restarts = [r.getMessage() for r in caplog.records if "starting it again from the checkpoint" in r.getMessage()]
    assert len(restarts) == 1 and "PythonWorkerStartTimeout" in restarts[0] and "restart 1" in restarts[0]


@pytest.mark.slow
def test_a_query_ended_again_and_again_fails_the_job_with_sparks_error(tmp_path, monkeypatch):
    """More restarts than the budget allows is no passing burst: the job fails, naming Spark's error."""
    from mirror.spark import job as job_module
    from mirror.spark.restarts import QueryRestarts
    from mirror.spark.runner import MirrorJobError

    _failing_watch(monkeypatch, times=10)
    monkeypatch.setattr(job_module, "QueryRestarts", lambda: QueryRestarts(limit=1))
    with EmbeddedBroker(tmp_path / "src") as src, EmbeddedBroker(tmp_path / "dst") as dst, \
            KafkaClient(src.bootstrap) as source:
        source.create_topics([NewTopic("live", 1)])
        _produce(source, "live", batches=1)
        config = load_config(None, {"source.bootstrap": src.bootstrap, "destination.bootstrap": dst.bootstrap,
                                    "topics": "live", "trigger_interval_s": 0.2, "checkpoint": str(tmp_path / "ck")})
        with pytest.raises(MirrorJobError, match="Python worker failed to connect back"):
            job_module.run_mirror(config)
