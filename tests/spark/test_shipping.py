"""Shipping kmirror to executors, the parts that need no cluster: the settings that ship an
archive, the warning for an archive older than the installed kmirror, the one line for
executors without kmirror (from the message Spark gives when a worker cannot start), and the
refusal to pack an editable install. The cluster itself: tests/spark/test_shipped_environment.py."""

from __future__ import annotations

import logging
import os

import pytest

from mirror.config import load_config
from mirror.pack_cli import _code_outside
from mirror.spark.session import spark_settings
from mirror.spark.pyspark_internals import spark_failure
from mirror.spark.shipping import (EXECUTOR_PYTHON, MissingOnExecutorsError, check_archive, missing_on_executors)

_BASE = {"source.bootstrap": "a:1", "destination.bootstrap": "b:1", "topics": "t"}

SPARK_WORKER_FAILURE = (
    "An error occurred while calling z:org.apache.spark.api.python.PythonRDD.collectAndServe.\n"
    ": org.apache.spark.SparkException: Job aborted due to stage failure: Task 0 in stage 0.0 failed 4 times, most "
    "recent failure: Lost task 0.3 in stage 0.0 (TID 3) (127.0.0.1 executor 0): org.apache.spark.SparkException: "
    "\nError from python worker:\n  /opt/bare/bin/python: Error while finding module specification for "
    "'mirror.spark.worker_daemon' (ModuleNotFoundError: No module named 'mirror')\nPYTHONPATH was:\n  ...")


def test_an_archive_is_shipped_under_one_name_and_its_python_runs_the_tasks(tmp_path):
    archive = tmp_path / "env.tar.gz"
    archive.write_bytes(b"")
    cluster = {**_BASE, "master": "spark://spark-master:7077"}
    settings = spark_settings(load_config(None, {**cluster, "ship_environment": str(archive)}))
    assert settings["spark.archives"] == f"{archive}#kmirror-env"
    assert EXECUTOR_PYTHON == "./kmirror-env/bin/python"
    assert "spark.archives" not in spark_settings(load_config(None, cluster))
    # A local master's executors are the driver's JVM, with the driver's Python: nothing to ship.
    assert "spark.archives" not in spark_settings(load_config(None, {**_BASE, "ship_environment": str(archive)}))


def test_a_missing_archive_is_one_line_and_an_old_one_a_warning(tmp_path, caplog):
    with pytest.raises(MissingOnExecutorsError, match="kmirror pack -o"):
        check_archive(tmp_path / "absent.tar.gz")
    old = tmp_path / "old.tar.gz"
    old.write_bytes(b"")
    os.utime(old, (0, 0))  # packed in 1970: before any installation
    with caplog.at_level(logging.WARNING):
        check_archive(old)
    assert "before the kmirror installed here" in caplog.text


def test_executors_without_kmirror_are_named_in_one_line_and_other_failures_are_not():
    error = missing_on_executors(spark_failure(RuntimeError(SPARK_WORKER_FAILURE)))
    assert error is not None and "--ship-environment" in str(error) and "\n" not in str(error)
    assert missing_on_executors(spark_failure(RuntimeError("Job aborted: ZeroDivisionError: division by zero"))) is None


def test_an_editable_install_is_not_packed():
    """The suite runs on ``pip install -e``, its code in the checkout, not the environment: pack
    must refuse it (tests/spark/test_shipped_environment.py packs a wheel's installation)."""
    import sys
    from pathlib import Path

    import mirror

    assert _code_outside(sys.prefix) == Path(mirror.__file__).resolve().parent
    assert _code_outside(str(Path(mirror.__file__).resolve().parents[1])) is None
