"""``kmirror failback``: copy home to the old primary what was written at the promoted
destination since ``kmirror failover``, then make the old primary primary again (issue 71).

Give it the options of the job that copied A -> B (the same --config and flags), once A is
back. It runs a job of its own, B -> A, named NAME-failback, its checkpoint CHECKPOINT-failback:

1. It refuses unless the job failed over (``kmirror failover``), and under any naming but
   replication_policy identity (it writes into A's topics of the same names).
2. It copies, into A's same topics, the records written at B from B's promotion points on,
   with B's records rewritten as kmirror writes every record: exactly-once by default, with
   its own offsets and offset syncs at A, until SIGTERM or SIGINT (or --once: until caught up),
   as ``kmirror run`` does. Topics made at B after the failover are copied home from their
   log start. The groups given (--groups) are translated to A as the copy goes, as run does.
3. It says A's unreplicated tail: per partition, the offsets A acknowledged that never reached
   B before the disaster. Without --reconcile they stay on A only, and B never gets them.

--reconcile, on the failback's first start (before it copied anything into A): the A -> B job
copies A's unreplicated tail into B once, after what B took meanwhile, so that both clusters
hold every acknowledged record; the failback then skips those records at B (they are A's own).
A group reading at B reads them there. Under exactly-once only (an at-least-once copy may
leave copies at B that no sync names, which the failback would copy back to A), and not for
topics whose copy rebuilds batches (by-key pairs, compacted topics): the failback skips
exactly the spans of the batches the reconcile forwarded.

--finish, once B's producers have stopped: it copies what is left, once; commits the groups'
translated offsets at A; records on B that A is primary again, with A's promotion points (A's
end, after everything the failback wrote); prints them; and exits 0. Then move producers and
consumers to A, and restart ``kmirror run`` A -> B with its old checkpoint: it mirrors from A's
promotion points on, and copies none of B's records back to B.

Tail rows (the job's source A):
  TOPIC, PARTITION    a partition of A
  FROM, TO            A's offsets [FROM, TO) that never reached B
  UNREPLICATED        TO - FROM (a transaction's markers count as offsets)
  AT-DESTINATION      yes: copied into B by --reconcile; no: on A only
Promotion rows (--finish):
  TOPIC, PARTITION, PROMOTION-POINT
                      A's last stable offset once the failback caught up: A's own records
                      start there again

Exit codes: 0 stopped by SIGTERM/SIGINT, caught up (--once), or failed back (--finish); 1 the
copy failed, or --finish was stopped before it caught up; 2 invalid configuration, the job never
failed over or already failed back, a naming other than identity, the failback still runs
(--finish), a cluster unreachable or credentials refused.
"""

from __future__ import annotations

import argparse
import logging
from typing import TYPE_CHECKING

from kcodecs import KMirrorError

from . import options
from .columns import columns
from .exits import EXIT_FAILED, EXIT_UNUSABLE, exit_code

if TYPE_CHECKING:
    from .engine.failback import TailPartition

__all__ = ["add_arguments", "run", "TAIL_HEADER", "PROMOTION_HEADER"]

log = logging.getLogger("kmirror")

TAIL_HEADER = ("TOPIC", "PARTITION", "FROM", "TO", "UNREPLICATED", "AT-DESTINATION")
PROMOTION_HEADER = ("TOPIC", "PARTITION", "PROMOTION-POINT")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    options.add_arguments(parser)
    parser.add_argument("--reconcile", action="store_true",
                        help="on the failback's first start: copy the source's unreplicated tail (what it acknowledged "
                        "that never reached the destination) into the destination first, so both clusters hold every "
                        "acknowledged record (exactly-once only)")
    parser.add_argument("--finish", action="store_true",
                        help="once the destination's producers have stopped: copy what is left, commit the groups' "
                        "offsets at the source, record that the source is primary again, and exit")


def run(args: argparse.Namespace) -> int:
    from .engine import client_for, open_transaction_wait_s
    from .engine.failback import (FailbackNamingError, finish_failback, plan_failback, reconciled_spans, seed_syncs,
                                  skipping, unreplicated_tail)
    from .engine.flow import FlowLog, FlowStepError
    from .engine.presence import JobRunningError, check_not_running
    from .groups_cli import NoMatchingGroupError, translate_groups
    from .run_cli import run_unusable, stop_on_signals
    from .spark.job import run_mirror

    config = options.config_from_args(args)
    if config is None:
        return EXIT_UNUSABLE
    unusable = run_unusable() + (FlowStepError, FailbackNamingError, JobRunningError)
    wait_s = open_transaction_wait_s(config.delivery.transaction_timeout_s)
    stop = stop_on_signals()
    try:
        b = client_for(config.clusters.destination, config.limits.retry)
        a = client_for(config.clusters.source, config.limits.retry)
        failback = plan_failback(config, b, max_wait_s=wait_s)
        reverse = failback.config
        if args.finish:
            check_not_running(FlowLog(a, reverse.job_name, max_wait_s=wait_s), "its finish")
            reverse = reverse.replaced("streaming", once=True)
        if args.reconcile:
            _reconcile(config, failback, a, b, stop, wait_s)
            if stop.is_set():
                return _stopped(args.finish)
        seeded = seed_syncs(failback, b, a, max_wait_s=wait_s,
                            timeout_ms=int(config.clusters.source.request_timeout_s * 1000))
        if seeded:
            log.info("the failback's offset syncs at the source start with %d of the job's, turned round: groups "
                     "that lagged at the destination are translated back exactly as well", seeded)
        _say_tail(unreplicated_tail(failback, a, b, max_wait_s=wait_s))
        log.info("failing back job %s: copying what the destination took from its promotion points on into the "
                 "source's same topics, as job %s (checkpoint %s)", failback.job, reverse.job_name,
                 reverse.streaming.checkpoint)
        skips = reconciled_spans(failback, b, max_wait_s=wait_s)
        run_mirror(skipping(reverse, skips), stop=stop, starts=failback.starts, skips=skips)
        if not args.finish:
            return 0
        if stop.is_set():
            return _stopped(True)
        if config.sync.groups is not None:
            try:
                translate_groups(reverse, config.sync.groups, apply=True)
            except NoMatchingGroupError as exc:
                print(f"groups: {exc}", flush=True)
        tail = unreplicated_tail(failback, a, b, max_wait_s=wait_s)  # before the finish turns the syncs round
        state = finish_failback(failback, b, a, max_wait_s=wait_s,
                                timeout_ms=int(config.clusters.destination.request_timeout_s * 1000))
    except KMirrorError as exc:
        return exit_code(exc, unusable, "failback failed")
    print(columns([PROMOTION_HEADER, *((tp.topic, str(tp.partition), str(offset))
                                       for tp, offset in sorted(state.promotion.items()))]), flush=True)
    _say_tail(tail, printed=True)
    print(f"job {failback.job} {state.line()}; producers and consumers may move back to it, and 'kmirror run' with "
          f"this job's options goes on from the promotion points", flush=True)
    return 0


def _stopped(finishing: bool) -> int:
    """A stop asked for before the copy caught up: a failback's normal end, but a finish's failure."""
    if not finishing:
        return 0
    log.error("the failback's finish was stopped before it caught up: nothing was recorded; run 'kmirror failback "
              "--finish' again")
    return EXIT_FAILED


def _reconcile(config, failback, a, b, stop, wait_s: float) -> None:
    """``--reconcile``: the A -> B job copies A's unreplicated tail into B, once, unless it did already."""
    from .engine.failback import reconcile_job, tail_to_reconcile
    from .spark.job import run_mirror

    pending = tail_to_reconcile(config, failback, a, b, max_wait_s=wait_s)
    if not pending:
        log.info("reconcile: nothing of the source's unreplicated tail is left to copy into the destination")
        return
    log.info("reconcile: job %s copies the source's unreplicated tail into the destination first: %s", failback.job,
             ", ".join(f"{t.tp} [{t.start}, {t.end})" for t in pending))
    run_mirror(reconcile_job(config, failback), stop=stop, starts=failback.failover.copied, step="reconcile")


def _say_tail(tail: list[TailPartition], *, printed: bool = False) -> None:
    """A's unreplicated tail: logged as the failback starts, printed (a table and a line) when it finishes."""
    reconciled = [t for t in tail if t.reconciled]
    alone = [t for t in tail if not t.reconciled]
    said = [f"the source's unreplicated tail: {sum(t.count for t in tail)} offsets of {len(tail)} partitions it "
            f"acknowledged never reached the destination before the failover" if tail else
            "the source's unreplicated tail: none"]
    if reconciled:
        said.append(f"{sum(t.count for t in reconciled)} offsets of {len(reconciled)} partitions copied into the "
                    f"destination since (--reconcile)")
    if alone:
        said.append(f"{sum(t.count for t in alone)} offsets of {len(alone)} partitions stay on the source only: " +
                    ", ".join(f"{t.tp} [{t.start}, {t.end})" for t in alone))
    line = "; ".join(said)
    if not printed:
        log.info("%s", line)
        return
    if tail:
        print(columns([TAIL_HEADER, *((t.tp.topic, str(t.tp.partition), str(t.start), str(t.end), str(t.count),
                                       "yes" if t.reconciled else "no") for t in tail)]), flush=True)
    print(line, flush=True)
