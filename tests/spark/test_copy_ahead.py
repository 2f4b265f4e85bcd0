"""The long-running job's resident copiers copy ahead of Spark's plan (issue 36):

- what the progress lines and the Prometheus metrics report is what reached the destination,
  copied-ahead records included, and the lag they show is the destination's;
- SIGKILLs of the whole job while copiers follow a steadily written source lose and duplicate
  nothing: librdkafka's read_committed consumer finds every record once, in order.
"""

from __future__ import annotations

import os
import random
import signal
import socket
import subprocess
import sys
import threading
import time
import urllib.request

import pytest
from librdkafka_reader import read_values
from prometheus_client.parser import text_string_to_metric_families

import kcodecs
from kcodecs import Record
from mirror.broker import EmbeddedBroker
from mirror.config import load_config
from mirror.kafka import KafkaClient, NewTopic, TopicPartition

pytestmark = pytest.mark.slow

PARTITIONS = 2


class Writer:
    """10 unique records to every partition every ``pause_s``, until stopped."""

    def __init__(self, bootstrap: str, topic: str, pause_s: float = 0.02):
        self.bootstrap, self.topic, self.pause_s = bootstrap, topic, pause_s
        self.written: dict[int, list[bytes]] = {p: [] for p in range(PARTITIONS)}
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self.run)

    def run(self) -> None:
        with KafkaClient(self.bootstrap) as client:
            n = 0
            while not self.stop.is_set():
                for p in range(PARTITIONS):
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


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def _scrape(port: int) -> dict[tuple[str, tuple], float]:
    text = urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10).read().decode()
    return {(s.name, tuple(sorted(s.labels.items()))): s.value
            for family in text_string_to_metric_families(text) for s in family.samples}


def _wait_until(predicate, what: str, timeout_s: float = 120) -> None:
    deadline = time.monotonic() + timeout_s
    while not predicate():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.2)


def test_progress_and_metrics_count_what_the_copiers_copied_ahead(tmp_path):
    from mirror.spark.job import run_mirror

    port = _free_port()
    with EmbeddedBroker(tmp_path / "src") as src, EmbeddedBroker(tmp_path / "dst") as dst:
        with KafkaClient(src.bootstrap) as client:
            client.create_topics([NewTopic("ahead", PARTITIONS)])
        config = load_config(None, {"source.bootstrap": src.bootstrap, "destination.bootstrap": dst.bootstrap,
                                    "topics": "ahead", "checkpoint": str(tmp_path / "ck"), "metrics_port": port,
                                    "trigger_interval_s": 2.0})
        stop = threading.Event()
        reports = []
        totals = []
        job = threading.Thread(target=lambda: totals.append(run_mirror(config, stop=stop, on_report=reports.append)))
        job.start()
        try:
            _wait_until(lambda: reports or not job.is_alive(), "the first micro-batch")
            for _ in range(3):  # bursts between triggers: the copiers take them before Spark plans them
                with Writer(src.bootstrap, "ahead", 0.01) as writer:
                    time.sleep(0.5)
            with KafkaClient(src.bootstrap) as client:
                ends = client.list_offsets([TopicPartition("ahead", p) for p in range(PARTITIONS)], "latest")
            produced = sum(ends.values())
            _wait_until(lambda: sum(report.counters.total_records for report in reports) >= produced,
                        "the progress lines to count every record")
            metrics = _scrape(port)
            copied = read_values(dst.bootstrap, "ahead", PARTITIONS)
        finally:
            stop.set()
            job.join(120)
    assert sum(report.counters.total_records for report in reports) == produced == sum(map(len, copied.values()))
    assert sum(value for (name, labels), value in metrics.items()
               if name == "kmirror_records_total" and ("topic", "ahead") in labels) == produced
    for p in range(PARTITIONS):
        assert metrics["kmirror_partition_lag_offsets", (("partition", str(p)), ("topic", "ahead"))] == 0
    assert totals and totals[0].counters.total_records == produced


def test_sigkills_while_copiers_follow_a_written_source_lose_and_duplicate_nothing(tmp_path):
    rng = random.Random(36)
    with EmbeddedBroker(tmp_path / "src") as src, EmbeddedBroker(tmp_path / "dst") as dst:
        with KafkaClient(src.bootstrap) as client:
            client.create_topics([NewTopic("followed", PARTITIONS)])
        command = [sys.executable, "-m", "mirror.cli", "run", "--source", src.bootstrap, "--destination",
                   dst.bootstrap, "--topics", "followed", "--checkpoint", str(tmp_path / "ck"), "--transaction-timeout",
                   "20"]
        env = {**os.environ, "PYTHONUNBUFFERED": "1"}
        with Writer(src.bootstrap, "followed") as writer:
            for kill in range(3):
                log_path = tmp_path / f"run-{kill}.log"
                with open(log_path, "w") as log_file:
                    job = subprocess.Popen(command, stderr=log_file, stdout=subprocess.DEVNULL, env=env,
                                           start_new_session=True)
                _wait_until(lambda: "records," in log_path.read_text() or job.poll() is not None, "copying", 180)
                assert job.poll() is None, log_path.read_text()[-3000:]
                time.sleep(rng.uniform(0.5, 3.0))  # copiers mid-transaction, ahead of the plan
                os.killpg(job.pid, signal.SIGKILL)
                job.wait(30)
        finished = subprocess.run(command + ["--once"], capture_output=True, text=True, env=env, timeout=600)
        assert finished.returncode == 0, finished.stderr[-3000:]
        copied = read_values(dst.bootstrap, "followed", PARTITIONS)
    for p in range(PARTITIONS):
        duplicated = len(copied[p]) - len(set(copied[p]))
        lost = len(set(writer.written[p]) - set(copied[p]))
        assert (lost, duplicated) == (0, 0), f"followed/{p}: {lost} lost, {duplicated} duplicated"
        assert copied[p] == writer.written[p], f"followed/{p}: out of order"
