"""The long-running job's resident copiers copy ahead of Spark's plan (issue 36):

- what the progress lines and the Prometheus metrics report is what reached the destination,
  copied-ahead records included, and the lag they show is the destination's;
- SIGKILLs of the whole job while copiers follow a steadily written source lose and duplicate
  nothing: librdkafka's read_committed consumer finds every record once, in order (2 kills at
  CI size, issue 36's 3 under ``./dev test --acceptance``: tests/support/sizes.py).
"""

from __future__ import annotations

import os
import random
import signal
import subprocess
import sys
import threading
import time

import pytest
from librdkafka_reader import read_values
from live_source import Writer, wait_until
from prometheus_scrape import scrape
from sizes import size

from mirror.bench.latency_proxy import free_port
from mirror.broker import EmbeddedBroker
from mirror.config import load_config
from mirror.kafka import KafkaClient, NewTopic, TopicPartition

pytestmark = pytest.mark.slow

PARTITIONS = 2
KILLS = size("copy_ahead").kills


def test_progress_and_metrics_count_what_the_copiers_copied_ahead(tmp_path):
    from mirror.spark.job import run_mirror

    port = free_port()
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
            wait_until(lambda: reports or not job.is_alive(), "the first micro-batch", 120, 0.2)
            for _ in range(3):  # bursts between triggers: the copiers take them before Spark plans them
                with Writer(src.bootstrap, "ahead", PARTITIONS, 0.01) as writer:
                    time.sleep(0.5)
            with KafkaClient(src.bootstrap) as client:
                ends = client.list_offsets([TopicPartition("ahead", p) for p in range(PARTITIONS)], "latest")
            produced = sum(ends.values())
            wait_until(lambda: sum(report.counters.total_records for report in reports) >= produced,
                       "the progress lines to count every record", 120, 0.2)
            metrics = scrape(port)
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
        with Writer(src.bootstrap, "followed", PARTITIONS) as writer:
            for kill in range(KILLS):
                log_path = tmp_path / f"run-{kill}.log"
                with open(log_path, "w") as log_file:
                    job = subprocess.Popen(command, stderr=log_file, stdout=subprocess.DEVNULL, env=env,
                                           start_new_session=True)
                wait_until(lambda: "records," in log_path.read_text() or job.poll() is not None, "copying", 180, 0.2)
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
