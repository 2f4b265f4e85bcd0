"""kmirror on a Spark cluster whose workers do not have it (issue 51): a real standalone master and
worker from PySpark's jars, whose executors' own Python (``PYSPARK_PYTHON``) is a bare virtual
environment (no kmirror, no lz4, no zstandard). kmirror is installed from its wheel elsewhere,
as a user installs it, and ``kmirror pack`` packs it; the driver runs from that installation.
librdkafka reads every verdict (read_committed):

- ``kmirror run --ship-environment`` copies a stream written while it runs, exactly once, on
  the worker's executors running the shipped Python, and stops on SIGTERM with exit code 0;
- so does the same job started by ``spark-submit`` on kmirror's application file;
- without it, the job fails in its first micro-batch with one line naming
  ``--ship-environment`` (exit 2), not a Python traceback from a worker.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import tarfile
import time

import pytest
from installed_kmirror import Installed, clean_env
from librdkafka_reader import read_values
from live_source import Writer, wait_until
from standalone_cluster import SPARK_HOME, standalone_cluster

from mirror.broker import EmbeddedBroker
from mirror.kafka import KafkaClient, NewTopic, TopicPartition

pytestmark = [pytest.mark.slow, pytest.mark.interop]

PARTITIONS = 3


class Shipped:
    def __init__(self, installed: Installed, archive, bare_python):
        self.installed, self.archive, self.bare_python = installed, archive, bare_python

    def spark_env(self) -> dict[str, str]:
        """The driver's environment: Spark on loopback, and executors whose Python is the bare one."""
        return {"SPARK_HOME": str(SPARK_HOME), "SPARK_LOCAL_IP": "127.0.0.1", "PYSPARK_PYTHON": str(self.bare_python)}


@pytest.fixture(scope="module")
def shipped(tmp_path_factory, installed) -> Shipped:
    base = tmp_path_factory.mktemp("shipped")
    archive = base / "kmirror-env.tar.gz"
    packed = installed.run(installed.kmirror, "pack", "-o", str(archive), timeout=900)
    assert packed.returncode == 0, packed.stderr
    assert f"ship it with 'kmirror run --ship-environment {archive}'" in packed.stderr
    bare = base / "bare"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(bare)], check=True, timeout=120)
    return Shipped(installed, archive, bare / "bin" / "python")


def test_the_archive_holds_kmirror_and_its_extensions_but_not_pyspark(shipped):
    with tarfile.open(shipped.archive) as archive:
        names = archive.getnames()
    site = [name.split("site-packages/", 1)[1] for name in names if "site-packages/" in name]
    tops = {name.split("/", 1)[0] for name in site}
    assert {"mirror", "kcodecs", "lz4", "zstandard", "crc32c", "pyarrow"} <= tops
    assert not {top for top in tops if top.startswith(("pyspark", "py4j"))}
    assert "bin/python" in names and "bin/kmirror" in names
    # An editable install would leave only a finder pointing at a source tree: not this one.
    assert not [name for name in site if "__editable__" in name]


def test_the_installed_kmirror_refuses_to_pack_over_a_file(shipped):
    again = shipped.installed.run(shipped.installed.kmirror, "pack", "-o", str(shipped.archive))
    assert again.returncode == 2 and "already exists" in again.stderr


def _copies_a_live_stream_and_stops_on_sigterm(command: list[str], env: dict[str, str], cluster, tmp_path,
                                               meanwhile=lambda: None) -> None:
    """``command`` (a kmirror job, long-running, to be given the clusters) copies a stream
    written while it runs, exactly once, on the worker's executors running the Python Spark
    unpacked from the archive, and exits 0 on SIGTERM. ``meanwhile()`` runs once part of the
    stream is copied, the stream still being written."""
    apps_before = set(cluster.work_dir.glob("app-*"))
    with EmbeddedBroker(tmp_path / "src") as src, EmbeddedBroker(tmp_path / "dst") as dst:
        with KafkaClient(src.bootstrap) as client:
            client.create_topics([NewTopic("live", PARTITIONS)])
        job = subprocess.Popen(
            [*command, "--source", src.bootstrap, "--destination", dst.bootstrap, "--topics", "live",
             "--checkpoint", str(tmp_path / "ck"), "--copy-tasks", "2"],
            cwd=tmp_path, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
            start_new_session=True)
        try:
            with Writer(src.bootstrap, "live", PARTITIONS, pause_s=0.05) as writer:
                wait_until(lambda: _copied(dst.bootstrap) > 300, "the job to copy part of the stream", 240, 0.5)
                meanwhile()
                wait_until(lambda: _copied(dst.bootstrap) > 3000, "the job to copy more of the stream", 240, 0.5)
            written = writer.written
            total = sum(map(len, written.values()))
            wait_until(lambda: sum(map(len, read_values(dst.bootstrap, "live", PARTITIONS).values())) >= total,
                       "the job to catch up", 120, 1)
            job.send_signal(signal.SIGTERM)
            _, log = job.communicate(timeout=120)
        finally:
            if job.poll() is None:
                os.killpg(job.pid, signal.SIGKILL)
                job.communicate()
        assert job.returncode == 0, log
        assert read_values(dst.bootstrap, "live", PARTITIONS) == written
    (app,) = set(cluster.work_dir.glob("app-*")) - apps_before  # this job's, on a cluster tests share
    assert list(app.glob("*/kmirror-env/bin/python")), cluster.logs()
    assert any("Starting Python task execution" in path.read_text() for path in app.glob("*/stderr"))


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    """One standalone master and worker for the tests that leave them as they found them (each
    job ends, and its executors with it); the test that kills a worker starts its own."""
    with standalone_cluster(tmp_path_factory.mktemp("spark"), cores=2, memory="1g") as started:
        yield started


def test_kmirror_run_ships_its_environment_and_copies_a_live_stream_exactly_once(shipped, cluster, tmp_path):
    _copies_a_live_stream_and_stops_on_sigterm(
        [shipped.installed.kmirror, "run", "--master", cluster.master_url, "--ship-environment",
         str(shipped.archive)], clean_env(**shipped.spark_env()), cluster, tmp_path)


def test_spark_submit_runs_the_same_job(shipped, cluster, tmp_path):
    """The platform's door: spark-submit, in client mode, on kmirror's application file; its
    --master is the master, and a SIGTERM to it (its JVM) stops the job after the micro-batch."""
    installed = shipped.installed
    app = installed.run(installed.kmirror, "submit-file").stdout.strip()
    assert app.startswith(str(installed.venv)), app
    _copies_a_live_stream_and_stops_on_sigterm(
        [str(SPARK_HOME / "bin" / "spark-submit"), "--master", cluster.master_url, "--deploy-mode", "client",
         app, "run", "--ship-environment", str(shipped.archive)],
        clean_env(**shipped.spark_env(), PYSPARK_DRIVER_PYTHON=str(installed.venv / "bin" / "python")),
        cluster, tmp_path)


def test_a_worker_lost_mid_stream_and_a_fresh_one_joining_lose_and_duplicate_nothing(shipped, tmp_path):
    """SIGKILL of the only worker, its executor and Python workers with it, while the copy runs;
    a fresh worker joins and gets the archive anew. read_committed sees every record once."""
    with standalone_cluster(tmp_path / "spark", cores=2, memory="1g") as cluster:
        def lose_the_worker() -> None:
            cluster.kill_worker("worker")
            cluster.add_worker("fresh")

        _copies_a_live_stream_and_stops_on_sigterm(
            [shipped.installed.kmirror, "run", "--master", cluster.master_url, "--ship-environment",
             str(shipped.archive)], clean_env(**shipped.spark_env()), cluster, tmp_path, meanwhile=lose_the_worker)
        assert len(list(cluster.work_dir.glob("app-*/*/kmirror-env"))) >= 2  # unpacked again on the fresh worker


def test_executors_without_kmirror_fail_at_once_with_one_line(shipped, cluster, tmp_path):
    installed = shipped.installed
    with EmbeddedBroker(tmp_path / "src") as src, EmbeddedBroker(tmp_path / "dst") as dst:
        with KafkaClient(src.bootstrap) as client:
            client.create_topics([NewTopic("events", 1)])
        began = time.monotonic()
        done = installed.run(installed.kmirror, "run", "--once", "--master", cluster.master_url,
                             "--source", src.bootstrap, "--destination", dst.bootstrap, "--topics", "events",
                             "--checkpoint", str(tmp_path / "ck"), timeout=300, **shipped.spark_env())
    assert done.returncode == 2, done.stderr
    errors = [line for line in done.stderr.splitlines() if " ERROR " in line]
    assert len(errors) == 1 and "--ship-environment" in errors[0], done.stderr
    assert "Traceback" not in done.stderr
    print(f"failed after {time.monotonic() - began:.0f} s")  # for the record, never asserted


def _copied(bootstrap: str) -> int:
    """The destination's end offsets, commit markers included: a sign of progress, not a count."""
    with KafkaClient(bootstrap) as client:
        if "live" not in client.topics():
            return 0
        return sum(client.list_offsets([TopicPartition("live", p) for p in range(PARTITIONS)], "latest").values())
