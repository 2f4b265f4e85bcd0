"""Shipping kmirror to executors that do not have it: a packed environment (``kmirror pack``),
unpacked by Spark in every executor's working directory and run as the executors' Python.

kmirror's copy runs in Python on the executors, with C extensions (lz4, zstandard,
python-snappy, crc32c, xxhash) that ``--py-files`` cannot carry. PySpark's documented way is
``spark.archives`` with a packed environment: Spark unpacks ``kmirror-env.tar.gz#kmirror-env``
into each executor's working directory, and the executors' Python is
``./kmirror-env/bin/python``. The driver's own Python worker, the source's planner, keeps the
driver's interpreter: PySpark gives each Python function the interpreter its SparkContext
names when the function is made, so the source is registered under the driver's
(:func:`~.pyspark_internals.python_of`) and every copy job after it under the archive's.

PySpark itself is left out of the archive (:data:`LEFT_OUT`): an executor's Python workers
import the PySpark of the cluster's Spark, which Spark puts first on their ``PYTHONPATH``
(``pyspark.zip``), and which must match its JVM anyway; leaving it out saves half a gigabyte.
"""

from __future__ import annotations

import logging
from datetime import datetime
from importlib import metadata
from pathlib import Path

from kcodecs import KMirrorError

from .pyspark_internals import SparkFailure

__all__ = ["ARCHIVE_NAME", "EXECUTOR_PYTHON", "LEFT_OUT", "shipping_settings", "check_archive",
           "MissingOnExecutorsError", "missing_on_executors"]

log = logging.getLogger(__name__)

ARCHIVE_NAME = "kmirror-env"
"""The directory Spark unpacks the archive into, in each executor's working directory."""
EXECUTOR_PYTHON = f"./{ARCHIVE_NAME}/bin/python"
LEFT_OUT = ("pyspark", "py4j")
"""Distributions not packed: the cluster's Spark brings its own (see the module's docstring)."""


class MissingOnExecutorsError(KMirrorError):
    """The executors' Python cannot import kmirror: the job cannot copy there."""


def shipping_settings(archive: Path) -> dict[str, str]:
    """Spark's settings that ship ``archive`` and run the executors' Python from it."""
    return {"spark.archives": f"{archive.resolve()}#{ARCHIVE_NAME}"}


def check_archive(archive: Path) -> None:
    """Raise a one-line error if ``archive`` cannot be shipped; warn if it was packed before
    the kmirror installed here (its executors would run older code than its driver)."""
    try:
        packed = archive.stat().st_mtime
    except OSError as exc:
        raise MissingOnExecutorsError(f"cannot ship {archive}: {exc.strerror or exc}; make it with "
                                      f"'kmirror pack -o {archive}'") from None
    installed = _installed_at()
    if installed is not None and packed < installed:
        log.warning("%s was packed %s, before the kmirror installed here (%s): its executors would run the older "
                    "code; pack it again with 'kmirror pack -o %s --force'", archive, _when(packed),
                    _when(installed), archive)


def _installed_at() -> float | None:
    """When the installed kmirror last changed: its newest file's time."""
    try:
        files = metadata.distribution("kmirror").files or ()
    except metadata.PackageNotFoundError:
        return None
    times = []
    for file in files:
        try:
            times.append(Path(file.locate()).stat().st_mtime)
        except OSError:
            continue
    return max(times, default=None)


def _when(seconds: float) -> str:
    return datetime.fromtimestamp(seconds).astimezone().strftime("%Y-%m-%d %H:%M:%S %Z")


def missing_on_executors(failure: SparkFailure) -> MissingOnExecutorsError | None:
    """The one-line error for a Spark failure whose cause is an executor Python without
    kmirror (its worker daemon, ``mirror.spark.worker_daemon``, cannot even start); else None."""
    if not failure.no_kmirror:
        return None
    return MissingOnExecutorsError(
        "the executors' Python has no kmirror (No module named 'mirror'): install kmirror at the same path on every "
        "worker, or ship it: 'kmirror pack -o kmirror-env.tar.gz', then 'kmirror run --ship-environment "
        "kmirror-env.tar.gz' (deploy/README.md)")


