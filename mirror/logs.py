"""How kmirror's processes log: one format for the driver (the ``kmirror`` command) and for the
Python processes Spark starts, the planner and the executors' workers, whose records would
otherwise reach stderr bare (Python's last-resort handler), without time or level.
"""

from __future__ import annotations

import logging
import sys

__all__ = ["LOG_FORMAT", "configure", "configure_spark_process"]

LOG_FORMAT = "%(asctime)s %(levelname)s %(name)s: %(message)s"


def configure(verbose: bool) -> None:
    """The command line's logging: INFO, or DEBUG with ``-v``."""
    logging.basicConfig(level=logging.DEBUG if verbose else logging.INFO, format=LOG_FORMAT, stream=sys.stderr)
    if not verbose:
        # py4j logs a lost connection to Spark's JVM, with its traceback, at INFO on the root
        # logger (``logging.info`` in java_gateway.py), where no level can single it out. A
        # JVM that ended with the job is not news; kmirror reports a failure in its own words.
        for handler in logging.getLogger().handlers:
            handler.addFilter(_not_py4j)
        # kafka-python logs every connection at INFO. Spark's Python bridge logs at ERROR, with
        # its stack trace, every error that foreachBatch raised; kmirror reports it in one line.
        logging.getLogger("kafka").setLevel(logging.WARNING)
        logging.getLogger("py4j").setLevel(logging.CRITICAL)


def _not_py4j(record: logging.LogRecord) -> bool:
    return "/py4j/" not in record.pathname.replace("\\", "/")


def configure_spark_process(level: int) -> None:
    """Logging in a Python process Spark started, unless something configured it already."""
    if not logging.getLogger().handlers:
        logging.basicConfig(level=level, format=LOG_FORMAT, stream=sys.stderr)
        logging.getLogger("kafka").setLevel(logging.WARNING)
