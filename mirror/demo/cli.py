"""``kmirror demo``: the whole mirror in one command, checked by an independent client.

Steps:
  1. start two embedded Kafka-compatible brokers (source and destination), or with
     --cluster kafka two real Apache Kafka clusters, in a temporary directory, removed at the
     end unless --keep DIR is given;
  2. fill the source with four topics, one per routing path:
       nokeys.kmirror      kmirror's producer, zstd and lz4, no-keys flag  -> passed through
       unkeyed.librdkafka  librdkafka, snappy, null keys, 3 -> 2 partitions -> inspected
       keyed.orders        librdkafka, lz4, 200 keys, 4 -> 6 partitions    -> rebuilt
       appendtime.events   librdkafka, gzip, LogAppendTime topic           -> inspected, re-stamped
  3. a consumer group reads a third of nokeys.kmirror at the source and commits;
  4. run the Spark mirror once, as `kmirror run --topics '.*' --once --groups ...` would
     (Trigger.AvailableNow), translating the group's offsets;
  5. check every topic: the records with `kmirror verify` on the same Spark (each present
     exactly once with equal key, value, headers and CreateTime; per-key order; keyed
     records on Kafka's murmur2 partition), then, reading both clusters with verify's reader,
     passed-through batches byte-identical, LogAppendTime stamped by the destination broker,
     the routing classes taken, and the group, resumed at the destination, reading exactly
     what it had not consumed;
  6. print the routing summary, throughput and every check.

Exit codes: 0 every check passed, 1 a check failed or the mirror failed, 2 the demo could not
start (e.g. --keep DIR is not empty, or confluent-kafka is not installed).
"""

from __future__ import annotations

import argparse
import contextlib
import logging
import tempfile
import time
from collections import defaultdict
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Protocol

from kcodecs import KMirrorError

from ..broker import EmbeddedBroker
from ..realkafka.distribution import ToolchainError
from ..progress import MicroBatchReport, RunTotals
from ..routing import RouteCounters
from .fill import DEMO_TOPICS, DemoError, Say, create_destination_topics, fill_source
from .groups import DEMO_GROUP, GROUP_TOPIC, consume_part, resume
from ..verify.demo_checks import (Check, Verification, read_batches, read_records, record_checks, verify_group_resume, verify_routes,
                     verify_topic)

if TYPE_CHECKING:
    from ..config import MirrorConfig

__all__ = ["add_arguments", "run", "Demo", "MirrorRun", "DEFAULT_RECORDS", "EXIT_FAILED", "EXIT_UNUSABLE"]

log = logging.getLogger(__name__)

DEFAULT_RECORDS = 200_000
MIN_RECORDS_PER_TOPIC = 100
"""Enough for batches of several records, which librdkafka compresses (a lone record it may not)."""
EXIT_FAILED = 1
EXIT_UNUSABLE = 2


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--records", type=_record_count, default=DEFAULT_RECORDS, metavar="N",
                        help=f"source records in all, split evenly over the four topics (default {DEFAULT_RECORDS})")
    parser.add_argument("--keep", type=Path, metavar="DIR",
                        help="put the brokers' logs and the Spark checkpoint in DIR (new or empty) and keep them")
    parser.add_argument("--master", default="local[2]", metavar="URL", help="Spark master (default local[2])")
    parser.add_argument("--cluster", choices=("embedded", "kafka"), default="embedded",
                        help="'embedded': kmirror's own brokers (default, nothing to install); 'kafka': two real "
                             "Apache Kafka clusters (KRaft, one node each), fetched with Maven on first use: "
                             "needs Java 17 and mvn")
    parser.add_argument("--kafka-version", default=None, metavar="VERSION",
                        help="with --cluster kafka: the Apache Kafka version, one of those pinned in "
                             "mirror/realkafka (default: the newest)")


def run(args: argparse.Namespace) -> int:
    for noisy in ("kafka", "py4j"):  # the verifier's consumer and Spark's gateway; their errors surface as ours
        logging.getLogger(noisy).setLevel(logging.ERROR)
    if args.keep is not None and args.keep.exists() and (not args.keep.is_dir() or any(args.keep.iterdir())):
        log.error("--keep %s: not a new or empty directory", args.keep)
        return EXIT_UNUSABLE
    place = (contextlib.nullcontext(str(args.keep)) if args.keep is not None
             else tempfile.TemporaryDirectory(prefix="kmirror-demo-", ignore_cleanup_errors=True))
    with place as workdir:
        try:
            with Demo(Path(workdir), master=args.master, **_clusters(args, Path(workdir))) as demo:
                demo.fill(args.records // len(DEMO_TOPICS))
                demo.consume_part_at_source()
                mirrored = demo.mirror()
                verification = demo.verify(mirrored)
        except (DemoError, ToolchainError, ValueError) as exc:
            log.error("%s", exc)
            return EXIT_UNUSABLE
        except KMirrorError as exc:
            log.error("demo failed: %s", exc)
            return EXIT_FAILED
    print(mirrored.totals.summary())
    print(verification.report())
    if args.keep is not None:
        print(f"kept the brokers' logs and the Spark checkpoint in {args.keep}")
    if not verification.ok:
        print(f"demo FAILED: {len(verification.failures)} of {len(verification.checks)} checks failed")
        return EXIT_FAILED
    print("demo passed: the destination is an exact mirror of the source")
    return 0


@dataclass(frozen=True)
class MirrorRun:
    """One run of the mirror: its totals, its routing counters per source topic, when it started
    (wall clock, for LogAppendTime checks) and how many source records it should have routed."""

    totals: RunTotals
    by_topic: dict[str, RouteCounters]
    started_ms: int
    expected_records: dict[str, int]


class Cluster(Protocol):
    """What the demo needs of a cluster: :class:`~mirror.broker.EmbeddedBroker` or
    :class:`~mirror.realkafka.KafkaCluster`, not yet started."""

    bootstrap: str

    def start(self) -> object: ...

    def stop(self) -> None: ...


class Demo:
    """Two clusters in ``workdir`` and the demo's steps. A context manager, so a test can fill
    and mirror more than once over the same clusters and checkpoint.

    The clusters are embedded brokers unless ``source`` and ``destination`` are given (real
    Kafka clusters, say); the demo starts and stops them."""

    def __init__(self, workdir: Path, *, master: str = "local[2]", say: Say = print,
                 source: Cluster | None = None, destination: Cluster | None = None):
        self.workdir = workdir
        self.master = master
        self.say = say
        self.source = source or EmbeddedBroker(workdir / "source", cluster_id="kmirror-demo-source")
        self.destination = destination or EmbeddedBroker(workdir / "destination", cluster_id="kmirror-demo-destination")
        self._filled = 0
        self._unmirrored: dict[str, int] = defaultdict(int)
        self._first_start_ms: int | None = None
        self._group_consumed: dict[int, int] | None = None
        self.config: MirrorConfig | None = None
        """The job's configuration, once :meth:`mirror` ran: ``kmirror verify`` reads its state."""

    def __enter__(self) -> "Demo":
        self.workdir.mkdir(parents=True, exist_ok=True)
        self.source.start()
        try:
            self.destination.start()
            create_destination_topics(self.destination.bootstrap)
        except BaseException:
            self.source.stop()
            raise
        self.say(f"kmirror demo in {self.workdir}: source cluster {self.source.bootstrap}, "
                 f"destination cluster {self.destination.bootstrap}")
        return self

    def __exit__(self, *exc) -> None:
        self.destination.stop()
        self.source.stop()

    def fill(self, per_topic: int) -> None:
        """Append ``per_topic`` records to every demo topic."""
        self.say(f"filling the source: {per_topic} records in each of {len(DEMO_TOPICS)} topics")
        fill_source(self.source.bootstrap, per_topic, start=self._filled, say=self.say)
        self._filled += per_topic
        for topic in DEMO_TOPICS:
            self._unmirrored[topic.name] += per_topic

    def consume_part_at_source(self, share: float = 1 / 3) -> None:
        """A consumer group reads ``share`` of a passed-through topic at the source and commits."""
        self._group_consumed = consume_part(self.source.bootstrap, share)
        self.say(f"consumer group {DEMO_GROUP} read {sum(self._group_consumed.values())} records of {GROUP_TOPIC} "
                 f"at the source and committed")

    def mirror(self) -> MirrorRun:
        """Run the Spark mirror until it has caught up (``--once``), as ``kmirror run`` does."""
        from ..config import load_config
        from ..spark.job import run_mirror

        config = self.config = load_config(None, {
            "source.bootstrap": self.source.bootstrap, "destination.bootstrap": self.destination.bootstrap,
            "topics": ".*", "rename": "{topic}", "partitioning": "by-key", "once": True, "groups": DEMO_GROUP,
            "checkpoint": str(self.workdir / "checkpoint"), "master": self.master,
        })
        by_topic: dict[str, RouteCounters] = defaultdict(RouteCounters)

        def collect(report: MicroBatchReport) -> None:
            for stats in report.ranges:
                by_topic[stats.tp.topic].merge(stats.counters)

        self.say(f"mirroring with Spark ({self.master}) until caught up; Spark takes a while to start")
        started_ms = int(time.time() * 1000)
        self._first_start_ms = self._first_start_ms or started_ms
        began = time.perf_counter()
        totals = run_mirror(config, on_report=collect)
        self.say(f"mirror finished: {time.perf_counter() - began:.1f} s wall clock, Spark start included")
        expected, self._unmirrored = dict(self._unmirrored), defaultdict(int)
        return MirrorRun(totals, dict(by_topic), started_ms, expected)

    def verify(self, run: MirrorRun) -> Verification:
        """``kmirror verify`` for the records, then what the demo shows beyond them, read with
        verify's reader (see :mod:`mirror.verify.demo_checks`)."""
        from ..verify.cli import verify_mirror

        self.say("verifying the records with kmirror verify (Spark)")
        assert self.config is not None, "verify after mirror"
        checks: list[Check] = record_checks(verify_mirror(self.config))
        self.say("verifying timestamps, batches, routes and the group: reading both clusters")
        names = [topic.name for topic in DEMO_TOPICS]
        source = read_records(self.source.bootstrap, names)
        destination = read_records(self.destination.bootstrap, names)
        for topic in DEMO_TOPICS:
            ours, theirs = source[topic.name], destination[topic.name]
            source_batches = destination_batches = None
            if topic.passes_through:
                source_batches = read_batches(self.source.bootstrap, topic.name, ours.partitions)
                destination_batches = read_batches(self.destination.bootstrap, topic.name, theirs.partitions)
            # LogAppendTime records of every run so far must be younger than the first run.
            checks += verify_topic(topic.name, ours, theirs, mirror_started_ms=self._first_start_ms or run.started_ms,
                                   source_batches=source_batches, destination_batches=destination_batches)
            checks.append(verify_routes(topic.name, run.by_topic.get(topic.name, RouteCounters()), topic.routes,
                                        run.expected_records.get(topic.name, 0)))
        if self._group_consumed is not None:
            group_source = source[GROUP_TOPIC]
            left = len(group_source.records) - sum(self._group_consumed.values())
            checks.append(verify_group_resume(GROUP_TOPIC, DEMO_GROUP, group_source, self._group_consumed,
                                              resume(self.destination.bootstrap, left)))
        return Verification(tuple(checks))


def _clusters(args: argparse.Namespace, workdir: Path) -> dict[str, Cluster]:
    """The demo's source and destination: embedded by default, or real Kafka (``--cluster kafka``)."""
    if args.cluster == "embedded":
        return {}
    from ..realkafka import KAFKA_4, KafkaCluster, distribution_for

    distribution = distribution_for(args.kafka_version) if args.kafka_version else KAFKA_4
    return {side: KafkaCluster(workdir / side, distribution=distribution) for side in ("source", "destination")}


def _record_count(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a whole number, got {text!r}") from None
    if value < MIN_RECORDS_PER_TOPIC * len(DEMO_TOPICS):
        raise argparse.ArgumentTypeError(f"needs at least {MIN_RECORDS_PER_TOPIC * len(DEMO_TOPICS)} "
                                         f"({MIN_RECORDS_PER_TOPIC} per topic), got {value}")
    return value
