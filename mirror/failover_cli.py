"""``kmirror failover``: promote the destination of a flow after its source is lost (issue 71).

Give it the options of the job that copies A -> B (the same --config and flags; those it does
not use are accepted and ignored). It needs only the destination B:

1. It refuses while that job still runs (it says so on B every 10 s, and that it stopped when it
   stops): stop the job first; one that was killed counts as stopped 30 s after it last spoke,
   and its resident copiers' lease (--lease, 30 s) after that. Exactly-once, the job's
   transactional ids are then fenced, so that no copy of it can commit into B any more.
2. It records on B, in kmirror-flow.NAME, B's end of every partition of the job's topics: the
   promotion point, after which records are B's own. `kmirror run` of the job is refused from
   then on, so that it never copies A's records over B's.
3. If A answers, it commits the mirrored groups' translated offsets at B (--groups; as `kmirror
   groups translate --apply` does, exact where the copy kept the offsets). If A does not answer,
   the groups resume at B where the job's last translation put them.
4. It prints, per source partition, how far the copy got and what A holds that never reached B
   (the recovery point), or "unknown" when A does not answer.

Then move producers and consumers to B.

One row per source partition:
  TOPIC, PARTITION    the source partition (A)
  COPIED-TO           the offset after the last one copied into B; '-': none was
  SOURCE-END          A's last stable offset; '-': A did not answer
  NOT-COPIED          offsets A holds past COPIED-TO, never copied (markers count as offsets);
                      'unknown': A did not answer
Then one row per partition of B the job copied into:
  DESTINATION-TOPIC, PARTITION, PROMOTION-POINT
                      B's last stable offset once the job's transactional ids are fenced:
                      B's own records start there

Exit codes: 0 promoted; 1 a broker refused a read or a write; 2 invalid configuration, the job
still runs, the flow already failed over, the destination unreachable or credentials refused,
or no state of the job on the destination (its --name or --checkpoint is not the job's).
"""

from __future__ import annotations

import argparse
import logging
from typing import TYPE_CHECKING

from kcodecs import KMirrorError

from . import options
from .columns import columns
from .exits import EXIT_UNUSABLE, exit_code

if TYPE_CHECKING:
    from .engine.failover import PartitionRecovery

__all__ = ["add_arguments", "run", "RECOVERY_HEADER", "PROMOTION_HEADER"]

log = logging.getLogger("kmirror")

RECOVERY_HEADER = ("TOPIC", "PARTITION", "COPIED-TO", "SOURCE-END", "NOT-COPIED")
PROMOTION_HEADER = ("DESTINATION-TOPIC", "PARTITION", "PROMOTION-POINT")
_SHOWN = frozenset({"clusters", "sync.groups", "streaming.checkpoint", "delivery.name",
                    "delivery.transaction_timeout_s", "limits.retry"})
_HELP = {
    "sync.groups": "consumer groups whose offsets are translated and committed at the destination, if the source "
                   "answers (whole-name match against the source's groups)",
    "delivery.name": "the job's --name: its state on the destination is kmirror-*.NAME",
}


def add_arguments(parser: argparse.ArgumentParser) -> None:
    options.add_arguments(parser, shown=_SHOWN, help=_HELP)


def run(args: argparse.Namespace) -> int:
    from .engine import client_for, open_transaction_wait_s
    from .engine.clients import asking_twice
    from .engine.copied import NoOffsetSyncsError
    from .engine.failover import fail_over, source_answers
    from .engine.flow import FlowStepError
    from .engine.presence import JobRunningError
    from .groups_cli import NoMatchingGroupError, translate_groups
    from .kafka import AuthenticationError, ClusterUnreachableError

    config = options.config_from_args(args)
    if config is None:
        return EXIT_UNUSABLE
    unusable = (ClusterUnreachableError, AuthenticationError, NoOffsetSyncsError, JobRunningError, FlowStepError)
    wait_s = open_transaction_wait_s(config.delivery.transaction_timeout_s)
    try:
        destination = client_for(config.clusters.destination, config.limits.retry)
        destination.cluster_id()  # unreachable: said as such, before A is tried
        log.info("asking the source whether it answers (%s)", ",".join(config.clusters.source.bootstrap))
        source = asking_twice(config.clusters.source, config.limits.retry)
        answered = source_answers(source)
        done = fail_over(config, destination, source if answered else None, max_wait_s=wait_s)
    except KMirrorError as exc:
        return exit_code(exc, unusable, "failover failed")
    print(columns([RECOVERY_HEADER, *(_recovery_row(p) for p in done.recovery)]), flush=True)
    if done.source_answered:
        lost = [p for p in done.recovery if p.not_copied]
        print(f"recovery point: {done.not_copied} offsets of {len(lost)} partitions the source holds never reached "
              f"the destination" + (": " + ", ".join(f"{p.source} [{max(p.copied or 0, p.start or 0)}, {p.end})"
                                                     for p in lost) if lost else ""), flush=True)
    else:
        print("recovery point: the source does not answer: unknown (what it holds past COPIED-TO never reached the "
              "destination)", flush=True)
    print(columns([PROMOTION_HEADER, *((tp.topic, str(tp.partition), str(offset))
                                       for tp, offset in sorted(done.state.promotion.items()))]), flush=True)
    if config.sync.groups is not None:
        if done.source_answered:
            try:
                translate_groups(config, config.sync.groups, apply=True)
            except NoMatchingGroupError as exc:
                print(f"groups: {exc}", flush=True)
            except KMirrorError as exc:
                log.error("the groups' offsets were not all committed at the destination (run 'kmirror groups "
                          "translate --apply' again): %s", exc)
                return exit_code(exc, (), "failover's group translation failed")
        else:
            print(f"groups: the source does not answer, so the groups matching {config.sync.groups!r} resume at the "
                  f"destination where the job's last translation committed them", flush=True)
    print(f"job {config.job_name} {done.state.line()}; producers and consumers may move to it now", flush=True)
    return 0


def _recovery_row(p: PartitionRecovery) -> tuple[str, ...]:
    return (p.source.topic, str(p.source.partition), "-" if p.copied is None else str(p.copied),
            "-" if p.end is None else str(p.end), "unknown" if p.not_copied is None else str(p.not_copied))
