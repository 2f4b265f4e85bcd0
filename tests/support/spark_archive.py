"""Class-data sharing (AppCDS) for the suite's Spark drivers: a pytest plugin.

A Spark driver's JVM loads some 15,000 classes from PySpark's jars at every start. The slow
tier starts dozens of them (every ``kmirror run`` and ``kmirror verify`` of its own process,
every worker's in-process session), and on the two cores each start cost about 21 CPU seconds
and 15.5 s; with the classes mapped from a shared archive, 14 and 10.3 (docs/testing.md,
"Shared costs"). So the first slow test of a run builds the archive, once per machine and
PySpark installation, and from then on every Spark driver the tests start maps it:

1. ``kmirror run --once`` between two embedded brokers, with ``-XX:DumpLoadedClassList``:
   the classes a mirror's driver loads;
2. ``java -Xshare:dump`` of that list with the driver's own class path (read from the
   running driver): a static archive in ``~/.cache/kmirror/cds/`` (about 180 MB, 40 s).

The archive reaches the drivers through ``SPARK_SUBMIT_OPTS``, which Spark's launcher adds
to the driver's JVM only (not to Kafka's or MirrorMaker 2's). ``-Xshare:auto``: a JVM whose
class path or jars differ from the archive's (an installed wheel's PySpark) ignores it
silently. A worker that finds another building it goes on without it rather than wait.
kmirror itself sets nothing of this: a job starts once and runs for months.
"""

from __future__ import annotations

import fcntl
import hashlib
import os
import shlex
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest

_CACHE = Path(os.environ.get("KMIRROR_CACHE_DIR") or Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache")
              / "kmirror") / "cds"
_state: dict[str, Path | None] = {}


def _archive_path() -> Path:
    import pyspark

    java = os.path.realpath(shutil.which("java") or "java")
    key = hashlib.sha1(f"{pyspark.__file__}\0{pyspark.__version__}\0{java}".encode()).hexdigest()[:12]
    return _CACHE / f"spark-{pyspark.__version__}-{key}.jsa"


def _driver_command(root: int) -> list[str] | None:
    import psutil

    try:
        processes = psutil.Process(root).children(recursive=True)
    except psutil.NoSuchProcess:
        return None
    for process in processes:
        try:
            command = process.cmdline()
        except psutil.Error:
            continue
        if command and command[0].endswith("java") and "org.apache.spark.deploy.SparkSubmit" in command:
            return command
    return None


def _build(archive: Path) -> None:
    from mirror.broker import EmbeddedBroker
    from mirror.kafka import KafkaClient, NewTopic

    with tempfile.TemporaryDirectory(prefix="kmirror-cds-") as work:
        work = Path(work)
        classes = work / "classes.lst"
        with EmbeddedBroker(work / "src") as src, EmbeddedBroker(work / "dst") as dst:
            with KafkaClient(src.bootstrap) as client:
                client.create_topics([NewTopic("cds", 1)])
            env = {**os.environ, "SPARK_SUBMIT_OPTS": f"-XX:DumpLoadedClassList={classes}"}
            job = subprocess.Popen([sys.executable, "-m", "mirror.cli", "run", "--once", "--source", src.bootstrap,
                                    "--destination", dst.bootstrap, "--topics", "cds", "--checkpoint",
                                    str(work / "ck")], env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            driver = None
            while job.poll() is None:
                driver = driver or _driver_command(job.pid)
                time.sleep(0.2)
        if job.returncode != 0 or driver is None or not classes.exists():
            return
        # The driver's class path and module options, as its JVM had them; nothing else.
        cp = driver[driver.index("-cp") + 1]
        modules = [arg for arg in driver if arg.startswith(("--add-modules", "--add-opens"))]
        partial = work / "spark.jsa"
        subprocess.run(["java", "-Xshare:dump", f"-XX:SharedClassListFile={classes}",
                        f"-XX:SharedArchiveFile={partial}", "-cp", cp, *modules],
                       stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, timeout=600)
        if partial.exists():
            archive.parent.mkdir(parents=True, exist_ok=True)
            shutil.move(str(partial), str(archive.with_suffix(".tmp")))
            os.replace(archive.with_suffix(".tmp"), archive)


def _archive() -> Path | None:
    """The archive, built now if no worker is building it; None while one is."""
    archive = _archive_path()
    if archive.exists():
        _state["archive"] = archive
        return archive
    _CACHE.mkdir(parents=True, exist_ok=True)
    with open(_CACHE / "build.lock", "w") as lock:
        try:
            fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            return None  # another worker builds it: this test goes without, the next looks again
        if not archive.exists():
            _build(archive)
    _state["archive"] = archive if archive.exists() else None  # built, or failed: not tried again
    return _state["archive"]


@pytest.fixture(autouse=True)
def _spark_class_archive(request) -> None:
    """Before each slow test (the quick tier starts no Spark, and builds nothing): the archive
    into ``SPARK_SUBMIT_OPTS``, once it exists."""
    if "archive" in _state or request.node.get_closest_marker("slow") is None or shutil.which("java") is None:
        return
    archive = _archive()
    if archive is None:
        return
    options = shlex.split(os.environ.get("SPARK_SUBMIT_OPTS", ""))
    os.environ["SPARK_SUBMIT_OPTS"] = shlex.join([*options, f"-XX:SharedArchiveFile={archive}", "-Xshare:auto"])
