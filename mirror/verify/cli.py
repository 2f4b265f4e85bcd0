"""``kmirror verify``: prove, on Spark, that the destination holds exactly what the job copied,
and nothing a consumer reads there besides.

For every topic pair of the job, it reads the source ranges the job has committed as copied
and the destination ranges its offset syncs say they went to, and compares them record by
record (key, value, headers, CreateTime): nothing missing, duplicated or altered, each record
on the partition the pair's partitioning gives it, each key's records in their source order,
and no record in those ranges that another producer wrote. It reads up to the job's last
commit, so it runs beside a live job. It takes every option of ``kmirror run`` (those not
listed below are accepted and ignored): the job's --config and flags name the clusters, the
job and its topics, and --master the Spark cluster it runs on.

What it covers: the ranges the job's offset syncs still describe (kmirror-offset-syncs.NAME
keeps a week), or those written since --from-time. Each pair's verdict says how many of the
destination's records it compared, of all a consumer reads there ("compared N of M"); the
others are not covered: before the oldest sync kept (or --from-time), or after the job's
last commit.

Findings, per partition, with a count and the first offset:
  missing            at the source, not at the destination
  duplicated         at the destination more often than at the source
  altered            at the destination with a key, value, header or time its source record lacks
  misplaced          on another destination partition than the pair's partitioning gives it
  reordered          before a record of the same key (and source partition) that preceded it there
  foreign            written into the destination by another producer than the job's copies
  foreign-duplicate  the same, and equal to a source record: consumers read that record twice
  gone               no longer at the source (retention or compaction since the copy): not a failure
  cleaned            no longer at the destination (its retention or compaction): not a failure

Foreign records fail on a destination topic kmirror created; on one it found there (the
user's), other producers may be expected, so they are reported without failing, unless
--strict.

Exit codes: 0 no failure; 1 a failure found (under at-least-once, duplicates, foreign ones too, are
reported and are not one: that mode's promise allows them); 2 invalid configuration, a
cluster unreachable or credentials refused, or no state of the job on the destination.
"""

from __future__ import annotations

import argparse
import functools
import json
import logging
import sys
import time
from typing import TYPE_CHECKING

from kcodecs import KMirrorError

from .. import options
from ..exits import EXIT_FAILED, EXIT_UNUSABLE, exit_code
from ..status_cli import HELP, SHOWN
from .report import failures, report_json, report_text

if TYPE_CHECKING:
    from ..config import MirrorConfig
    from .report import PairReport

__all__ = ["add_arguments", "run", "verify_mirror"]

log = logging.getLogger("kmirror")

_SHOWN = SHOWN | {"streaming.master", "streaming.spark_conf", "streaming.ship_environment", "delivery.mode"}
"""``kmirror status``'s settings (the clusters, the job, its topics), and the Spark it runs on and
the job's delivery mode; the others are accepted, ignored and not listed."""
_HELP = HELP | {
    "delivery.mode": "the job's delivery mode: under at-least-once, duplicates are reported but are no failure",
}


def add_arguments(parser: argparse.ArgumentParser) -> None:
    from ..config.sections import time_ms

    def moment(text: str) -> int:
        try:
            return time_ms(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"expected an ISO-8601 time or milliseconds since the epoch, "
                                             f"got {text!r}") from None

    options.add_arguments(parser, shown=_SHOWN, help=_HELP)
    parser.add_argument("--from-time", type=moment, metavar="TIME",
                        help="verify only what the job copied at or after TIME (ISO 8601, UTC unless it says; or ms "
                        "since the epoch): recent data, in a fraction of the time")
    parser.add_argument("--strict", action="store_true",
                        help="fail on foreign records (written by another producer) in a destination topic kmirror "
                        "found there too, not only in one it created")
    parser.add_argument("--json", action="store_true", help="print JSON instead of the tables")


def run(args: argparse.Namespace) -> int:
    from ..engine.status import NoSuchJobError
    from ..kafka import AuthenticationError, ClusterUnreachableError

    config = options.config_from_args(args)
    if config is None:
        return EXIT_UNUSABLE
    try:
        reports = verify_mirror(config, from_ms=args.from_time)
    except KMirrorError as exc:
        return exit_code(exc, (NoSuchJobError, ClusterUnreachableError, AuthenticationError), "verify failed")
    at_least_once = config.delivery.mode == "at-least-once"
    if args.json:
        json.dump(report_json(reports), sys.stdout, indent=2)
        print()
    else:
        print(report_text(reports, at_least_once=at_least_once, strict=args.strict))
    failed = failures(reports, at_least_once=at_least_once, strict=args.strict)
    if failed:
        log.error("verify: %d records fail (%s)", sum(f.count for f in failed),
                  ", ".join(sorted({f.kind for f in failed})))
        return EXIT_FAILED
    if not reports:
        log.warning("verify: the job has committed no copy its offset syncs describe%s: nothing to verify",
                    " since --from-time" if args.from_time is not None else "")
    return 0


def verify_mirror(config: MirrorConfig, *, from_ms: int | None = None) -> list[PairReport]:
    """Each topic pair's report (pairs whose partitioning the job has not chosen yet are not
    copied yet, and left out)."""
    from ..engine import client_for
    from ..spark.session import spark_session
    from .compare import compare_pairs, pair_groups
    from .plan import plan_mirror

    with client_for(config.clusters.source, config.limits.retry) as source, \
            client_for(config.clusters.destination, config.limits.retry) as destination:
        plans, syncs = plan_mirror(config, source, destination, from_ms=from_ms)
    plans = [plan for plan in plans if plan.sources]
    if not plans or syncs is None:
        return []

    @functools.cache
    def later_producers() -> set[int]:
        """Asked once a pair's rows are read, if some look foreign; read the first time only."""
        with client_for(config.clusters.destination, config.limits.retry) as destination:
            return syncs.producers_since(destination)

    groups = pair_groups(plans)
    log.info("verify: %d topic pairs, %d source offsets, on Spark, in %d groups", len(plans),
             sum(p.records for p in plans), len(groups))
    started = time.monotonic()
    spark = spark_session(_compiling(config))
    log.info("verify: Spark started in %.1f s", time.monotonic() - started)
    reports = []
    for number, group in enumerate(groups, 1):
        started = time.monotonic()
        reports += compare_pairs(spark, group, config.clusters.source, config.clusters.destination,
                                 config.limits.retry, later_producers=later_producers)
        with_findings = [report for report in reports[-len(group):] if report.findings]
        log.info("verify: group %d of %d (%d pairs, %s first): %d records in %.1f s, %s", number, len(groups),
                 len(group), group[0].source_topic, sum(r.source_records for r in reports[-len(group):]),
                 time.monotonic() - started, "exact" if not with_findings else "findings in " + ", ".join(
                     f"{r.source_topic} -> {r.destination_topic} ({', '.join(sorted({f.kind for f in r.findings}))})"
                     for r in with_findings[:10]) + (f" and {len(with_findings) - 10} more" if len(with_findings) > 10
                                                     else ""))
    return reports


def _compiling(config: MirrorConfig) -> MirrorConfig:
    """``config`` with the JVMs' optimising compiler (C2) back, unless its ``spark_conf`` says
    otherwise. kmirror's Spark JVMs compile with C1 only (:data:`~.spark.session.JVM_OPTIONS`),
    since no record passes through them in a mirror; verify's shuffles and aggregations run in
    them, and ran markedly slower so (docs/performance.md, "kmirror verify")."""
    options = "-XX:+TieredCompilation"  # the JVM's default, said so that kmirror's C1-only setting is replaced
    conf = {"spark.driver.extraJavaOptions": options, "spark.executor.extraJavaOptions": options}
    streaming = config.streaming.model_copy(update={"spark_conf": conf | config.streaming.spark_conf})
    return config.model_copy(update={"streaming": streaming})
