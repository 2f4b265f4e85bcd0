"""``kmirror status``: how far behind a mirror is, read from the clusters, with no running job.

It reads what the job keeps on the destination (its offsets, or at-least-once its offset syncs,
and kmirror-provenance) and the source's end offsets as a read_committed consumer sees them. It
takes every option of ``kmirror run`` (those not listed below are accepted and ignored), so the
job's --config file and flags name the clusters, the job and its topics; the job's name is
--name, or derived from --checkpoint as the job derives it.

A first line says which cluster is primary for the job's flow: the source, or, after ``kmirror
failover``, the destination; then, until ``kmirror failback --finish``, the table is the
failback's (NAME-failback, from the destination back to the source), or a line saying it has not
started or that the source does not answer.

One line per mirrored topic (with --partitions, one per partition too); a source topic deleted
and made again since the job last committed it is marked "(made again)": the job follows the
new topic from its log start, and its progress shows from its first commit (or offset sync) of it.
One the job copied that the source deleted is marked "(deleted at the source)", with no lag:
nothing more of it is copied; one whose destination topic was deleted under the job, "(destination
deleted)": a running job makes it again if kmirror created it, and copies the source again.
  MIRRORED      offsets of the source the job has committed as copied, of the source's end
  LAG           offsets between the two (a source transaction's markers count as offsets)
  LAST-COMMIT   when the job last committed the topic (UTC), or '-' if never
  PARTITIONING  preserve or by-key, as the job chose it for the pair; '-' if not yet
  DESTINATION   the destination topic, and whether kmirror created it or found it there

With --metrics-url, a last line for the running job: whether it answers, its resident
copiers, its micro-batches,
how long ago it completed the last one, and its errors by kind.

Exit codes: 0 done; 1 with --max-lag, a partition further behind than that; 2 invalid
configuration, a cluster unreachable after retries or credentials refused, or no state of the
job on the destination (a wrong --name or --checkpoint).
"""

from __future__ import annotations

import argparse
import json
import logging
import sys
from datetime import datetime, timezone
from typing import TYPE_CHECKING

from kcodecs import KMirrorError

from . import options
from .columns import columns
from .exits import EXIT_FAILED, EXIT_UNUSABLE, exit_code

if TYPE_CHECKING:
    from .engine.status import TopicStatus

__all__ = ["add_arguments", "run", "lines", "as_json", "SHOWN", "HELP"]

log = logging.getLogger("kmirror")

SHOWN = frozenset({"clusters.source", "clusters.destination", "clusters.topics", "clusters.exclude",
                    "clusters.rename", "clusters.replication_policy", "clusters.source_alias",
                    "clusters.destination_alias", "streaming.checkpoint", "delivery.name", "limits.retry"})
"""The ``kmirror run`` settings this command uses (those that name the clusters, the job and its
topics: ``kmirror verify`` uses them too); the others are accepted, ignored and not listed."""
HELP = {
    "streaming.checkpoint": "the job's Spark checkpoint directory, which names the job when --name is not given",
    "delivery.name": "the job's --name: its state is kmirror-offsets.NAME (or kmirror-offset-syncs.NAME) on the "
                     "destination",
}
HEADER = ("TOPIC", "MIRRORED", "LAG", "LAST-COMMIT", "PARTITIONING", "DESTINATION")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    options.add_arguments(parser, shown=SHOWN, help=HELP)
    parser.add_argument("--partitions", action="store_true", help="a line per partition too")
    parser.add_argument("--json", action="store_true", help="print JSON (every partition) instead of the table")
    parser.add_argument("--max-lag", type=int, metavar="N",
                        help="exit 1 when any partition is more than N offsets behind (for cron and readiness probes)")
    parser.add_argument("--metrics-url", metavar="URL",
                        help="the running job's metrics (http://HOST:PORT/metrics, its --metrics-port): adds whether "
                        "it answers, its resident copiers, its micro-batches and when it last completed one, and its "
                        "errors by kind")


def run(args: argparse.Namespace) -> int:
    from .engine import client_for
    from .engine.flow import FlowLog, primary_line
    from .engine.status import NoSuchJobError, mirror_status
    from .kafka import AuthenticationError, ClusterUnreachableError

    config = options.config_from_args(args)
    if config is None:
        return EXIT_UNUSABLE
    try:
        with client_for(config.clusters.source, config.limits.retry) as source, \
                client_for(config.clusters.destination, config.limits.retry) as destination:
            state = FlowLog(destination, config.job_name).state()
            if state is not None and state.step == "failed-over":
                return _failing_back(args, config, state, source, destination)
            topics = mirror_status(config, source, destination)
    except KMirrorError as exc:
        return exit_code(exc, (NoSuchJobError, ClusterUnreachableError, AuthenticationError), "status failed")
    job = running_job(args.metrics_url) if args.metrics_url else None
    if args.json:
        json.dump({"primary": _primary(state), "topics": as_json(topics), **({"job": job} if job is not None else {})},
                  sys.stdout, indent=2)
        print()
    else:
        print(primary_line(state))
        print(columns(lines(topics, partitions=args.partitions)))
        if job is not None:
            print(_job_line(job))
    behind = [p for topic in topics for p in topic.partitions if args.max_lag is not None and p.lag > args.max_lag]
    if behind:
        worst = max(behind, key=lambda p: p.lag)
        log.error("%d partitions are more than %d offsets behind (the furthest: %s, %d)", len(behind), args.max_lag,
                  worst.source, worst.lag)
        return EXIT_FAILED
    return 0


def _primary(state) -> dict:
    """The flow's primary for --json: ``source`` or ``destination``, and the step that made it so."""
    if state is None:
        return {"cluster": "source", "step": None, "at_ms": None}
    return {"cluster": "destination" if state.step == "failed-over" else "source", "step": state.step,
            "at_ms": state.at_ms}


def _failing_back(args: argparse.Namespace, config, state, source, destination) -> int:
    """After a failover the job's copy is refused, and what moves is its failback, B -> A: its
    lag is shown instead (or that it has not started, or that A does not answer)."""
    from .engine.clients import asking_twice
    from .engine.failback import FailbackNamingError, failback_job
    from .engine.failover import source_answers
    from .engine.flow import primary_line
    from .engine.status import NoSuchJobError, mirror_status

    try:
        reverse = failback_job(config, state)
    except FailbackNamingError as exc:
        print(primary_line(state))
        print(f"failback: none: {exc}")
        return 0
    topics, note = None, None
    # Asked twice, not with the job's retries: after a disaster the source is often gone.
    if not source_answers(asking_twice(config.clusters.source, config.limits.retry)):
        note = "failback: the source does not answer"
    else:
        try:
            topics = mirror_status(reverse, destination, source)
        except NoSuchJobError:
            note = f"failback: not started (kmirror failback with this job's options runs it, as {reverse.job_name})"
    if args.json:
        json.dump({"primary": _primary(state), "failback": {"job": reverse.job_name, "started": topics is not None,
                                                             "topics": as_json(topics or [])}}, sys.stdout, indent=2)
        print()
        return 0
    print(primary_line(state))
    if topics is None:
        print(note)
    else:
        print(f"failback {reverse.job_name}, from the destination to the source:")
        print(columns(lines(topics, partitions=args.partitions)))
    return 0


def lines(topics: list[TopicStatus], *, partitions: bool = False) -> list[tuple[str, ...]]:
    """The table's rows, the header first."""
    rows = [HEADER]
    for topic in topics:
        mirrored = sum(p.mirrored_to - p.start for p in topic.partitions if p.mirrored_to is not None)
        total = sum(p.end - p.start for p in topic.partitions)
        made = {True: "created", False: "found", None: "not yet seen"}[topic.created]
        mark = (" (made again)" if topic.made_again else " (deleted at the source)" if topic.gone
                else " (destination deleted)" if topic.destination_lost else "")
        rows.append((topic.topic + mark, f"{mirrored}/{total}" if not topic.gone else "-", str(topic.lag),
                     _when(topic.committed_ms),
                     topic.partitioning or "-", f"{topic.destination_topic} ({made})"))
        if partitions:
            for p in topic.partitions:
                rows.append((f"  {p.source}", f"{p.mirrored_to if p.mirrored_to is not None else '-'}/{p.end}",
                             str(p.lag), _when(p.committed_ms), "", ""))
    return rows


def as_json(topics: list[TopicStatus]) -> list[dict]:
    return [{"topic": t.topic, "destination_topic": t.destination_topic, "partitioning": t.partitioning,
             "created": t.created, "made_again": t.made_again, "gone": t.gone,
             "destination_lost": t.destination_lost, "lag": t.lag, "last_commit_ms": t.committed_ms,
             "partitions": [{"partition": p.source.partition, "mirrored_to": p.mirrored_to, "start": p.start,
                             "end": p.end, "lag": p.lag, "last_commit_ms": p.committed_ms} for p in t.partitions]}
            for t in topics]


def running_job(url: str) -> dict:
    """What the running job's metrics say: ``up`` (it answered), and if so its copiers, micro-batches,
    seconds since the last one completed, and errors by kind."""
    import time
    import urllib.request

    from prometheus_client.parser import text_string_to_metric_families

    try:
        with urllib.request.urlopen(url, timeout=5) as answer:
            text = answer.read().decode()
    except OSError as exc:
        return {"up": False, "error": str(getattr(exc, "reason", exc))}
    samples = {(sample.name, tuple(sorted(sample.labels.items()))): sample.value
               for family in text_string_to_metric_families(text) for sample in family.samples}
    last = samples.get(("kmirror_last_micro_batch_timestamp_seconds", ()))
    return {"up": True, "copiers": int(samples.get(("kmirror_copiers", ()), 0)),
            "micro_batches": int(samples.get(("kmirror_micro_batches_total", ()), 0)),
            "since_last_micro_batch_s": round(time.time() - last, 1) if last else None,  # 0: none yet
            "errors": {dict(labels)["kind"]: int(value) for (name, labels), value in samples.items()
                       if name == "kmirror_errors_total" and value}}


def _job_line(job: dict) -> str:
    if not job["up"]:
        return f"job: not answering ({job['error']})"
    since = job["since_last_micro_batch_s"]
    errors = ", ".join(f"{kind} {n}" for kind, n in sorted(job["errors"].items())) or "none"
    return (f"job: up, {job['copiers']} copiers, {job['micro_batches']} micro-batches, the last "
            f"{'none yet' if since is None else f'{since:g} s ago'}; errors: {errors}")


def _when(ms: int | None) -> str:
    if ms is None:
        return "-"
    return datetime.fromtimestamp(ms / 1000, tz=timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")
