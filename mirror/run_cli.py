"""``kmirror run``: mirror topics from one cluster to another with Spark Structured Streaming.

Every setting can come from a TOML file (``--config``, keys as in docs/configuration.md);
flags given on the command line override it. Exit codes: 0 done (``--once`` caught up, or
stopped by SIGTERM/SIGINT after the current micro-batch), 1 the copy failed (corrupt source
batch, data loss, a broker error), 2 invalid configuration, a destination topic that cannot take
its source's partitions, a cluster unreachable at start, credentials or certificates refused,
or an outage longer than --max-outage.
"""

from __future__ import annotations

import argparse
import logging
import signal
import threading

from kcodecs import KMirrorError

from . import options
from .exits import EXIT_FAILED, EXIT_UNUSABLE, exit_code

__all__ = ["add_arguments", "run", "EXIT_FAILED", "EXIT_UNUSABLE"]

log = logging.getLogger("kmirror")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Every setting of the job as a flag (:mod:`.options`)."""
    options.add_arguments(parser)


def run(args: argparse.Namespace) -> int:
    from .engine import TopicMismatchError
    from .kafka import AuthenticationError, ClusterUnreachableError

    config = options.config_from_args(args)
    if config is None:
        return EXIT_UNUSABLE
    stop = threading.Event()

    def request_stop(signum, _frame) -> None:
        log.info("%s received: stopping after the current micro-batch", signal.Signals(signum).name)
        stop.set()

    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, request_stop)
    from .spark.job import run_mirror

    try:
        run_mirror(config, stop=stop)
    except KMirrorError as exc:
        return exit_code(exc, (ClusterUnreachableError, AuthenticationError, TopicMismatchError), "mirror failed")
    return 0
