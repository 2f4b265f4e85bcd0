"""``kmirror run``: mirror topics from one cluster to another with Spark Structured Streaming.

Every setting can come from a TOML file (``--config``, keys as in docs/configuration.md);
flags given on the command line override it. ``--mirrormaker2-config`` reads a MirrorMaker 2
file under both (:mod:`mirror.config.mirrormaker2`) and takes over where that MirrorMaker 2
stopped (:mod:`mirror.engine.takeover`); ``--print-config`` shows the result as TOML and exits. Exit codes: 0 done (``--once`` caught up, or
stopped by SIGTERM/SIGINT after the current micro-batch), 1 the copy failed (corrupt source
batch, data loss, a broker error), 2 invalid configuration, a destination topic that cannot take
its source's partitions, a cluster unreachable at start, credentials or certificates refused,
an outage longer than --max-outage, a MirrorMaker 2 file with keys kmirror cannot honour, a
MirrorMaker 2 to take over from that still runs, or a flow failed over to the destination
(``kmirror failover``) and not failed back.
"""

from __future__ import annotations

import argparse
import logging
import signal
import threading
from pathlib import Path

from kcodecs import KMirrorError

from . import options
from .exits import EXIT_FAILED, EXIT_UNUSABLE, exit_code

__all__ = ["add_arguments", "run", "stop_on_signals", "run_unusable", "EXIT_FAILED", "EXIT_UNUSABLE"]

log = logging.getLogger("kmirror")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Every setting of the job as a flag (:mod:`.options`), and the switch from MirrorMaker 2."""
    options.add_arguments(parser)
    mm2 = parser.add_argument_group("coming from MirrorMaker 2")
    mm2.add_argument("--mirrormaker2-config", type=Path, metavar="FILE",
                     help="a MirrorMaker 2 dedicated-mode properties file (mm2.properties): its clusters, topics, "
                     "naming, syncs, security and delivery become this job's settings (--config and flags override "
                     "them; keys kmirror cannot honour are listed and the job is not started), and a job with no "
                     "checkpoint takes over where that MirrorMaker 2 stopped, once it is found stopped")
    mm2.add_argument("--flow", metavar="SOURCE->TARGET",
                     help="the MirrorMaker 2 flow to take over, where its file enables several (quote it in a shell: "
                     "--flow 'A->B')")
    parser.add_argument("--print-config", action="store_true",
                        help="print the resulting configuration as TOML (secrets masked) and exit without copying")


def run(args: argparse.Namespace) -> int:
    from .engine.flow import FlowStepError
    from .engine.takeover import MirrorMakerRunningError, TakeoverError


    mapping = _mirrormaker2(args)
    if mapping is False:
        return EXIT_UNUSABLE
    config = options.config_from_args(args, base=mapping.settings if mapping else None)
    if config is None:
        return EXIT_UNUSABLE
    if args.print_config:
        from .config.printing import config_toml

        print(config_toml(config), end="")
    if mapping and mapping.unsupported:
        log.error("not started: the MirrorMaker 2 file asks for %d things kmirror cannot do (listed above)",
                  len(mapping.unsupported))
        return EXIT_UNUSABLE
    if args.print_config:
        return 0
    stop = stop_on_signals()
    from .spark.job import run_mirror

    try:
        run_mirror(config, stop=stop)
    except KMirrorError as exc:
        return exit_code(exc, run_unusable() + (MirrorMakerRunningError, TakeoverError, FlowStepError), "mirror failed")
    return 0


def stop_on_signals() -> threading.Event:
    """An event SIGTERM and SIGINT set: the job stops after its current micro-batch."""
    stop = threading.Event()

    def request_stop(signum, _frame) -> None:
        log.info("%s received: stopping after the current micro-batch", signal.Signals(signum).name)
        stop.set()

    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, request_stop)
    return stop


def run_unusable() -> tuple[type[KMirrorError], ...]:
    """The errors that end a run with :data:`EXIT_UNUSABLE`: nothing could be copied, for a
    reason the operator fixes (a wrong address, refused credentials, a destination topic too
    small, executors without kmirror)."""
    from .engine import TopicMismatchError
    from .kafka import AuthenticationError, ClusterUnreachableError
    from .spark.shipping import MissingOnExecutorsError

    return ClusterUnreachableError, AuthenticationError, TopicMismatchError, MissingOnExecutorsError


def _mirrormaker2(args: argparse.Namespace):
    """The MirrorMaker 2 file's mapping, its ignored and unsupported keys logged one line each;
    None without the flag, False (after logging why) when the file cannot be used at all."""
    if args.mirrormaker2_config is None:
        if args.flow is not None:
            log.error("--flow names a MirrorMaker 2 flow: it needs --mirrormaker2-config")
            return False
        return None
    from .config import ConfigError
    from .config.mirrormaker2 import read_mirrormaker2

    try:
        mapping = read_mirrormaker2(args.mirrormaker2_config, args.flow)
    except ConfigError as exc:
        log.error("%s", exc)
        return False
    log.info("MirrorMaker 2 flow %s->%s from %s", mapping.source, mapping.target, args.mirrormaker2_config)
    for key in mapping.ignored:
        log.info("  ignored %s: %s", key.key, key.reason)
    for key in mapping.unsupported:
        log.error("  cannot honour %s: %s", key.key, key.reason)
    return mapping
