"""``kmirror failover``'s work: promote the destination B of a flow A -> B (issue 71).

It needs only B: the job's offset syncs and offsets there say how far each source partition
was copied (:mod:`.copied`), and B's own ends are the promotion points (:class:`~.flow.FlowState`).
A, if it answers, adds the recovery point: per source partition, the records A holds that
never reached B. A that does not answer is the disaster's usual case, and the report says
"unknown" rather than guess.

The promotion point is B's last stable offset once the job's transactional ids are fenced
(exactly-once: a copier that outlived its driver can commit nothing more, and what it left
open is aborted), so what is past it at the failover is none of the job's, and what producers
write at B from then on comes after it. At-least-once, nothing can be fenced: the job's
presence lapses only after its copiers' lease (:mod:`.presence`).
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass
from typing import Mapping

from kcodecs import KMirrorError

from ..config import MirrorConfig
from ..kafka import AuthenticationError, KafkaClient, TopicPartition
from ..kafka.types import listed_ids
from ..kafka.client import READ_COMMITTED
from .copied import NoOffsetSyncsError, copied_state
from .exactly_once import fence_tasks
from .flow import FlowLog, FlowState, check_step
from .offset_syncs import OffsetSyncStore, offset_syncs_topic
from .own_topics import mirrored
from .presence import check_not_running
from .provenance import PROVENANCE_TOPIC, ProvenanceLog
from .topics import selected_listings

__all__ = ["Failover", "PartitionRecovery", "fail_over", "source_answers"]

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class PartitionRecovery:
    """One source partition at the failover: how far it was copied, and what A holds past it."""

    source: TopicPartition
    copied: int | None
    """The offset after the last one copied into B; None: nothing of it was."""
    start: int | None = None
    """A's log start; None: A did not answer."""
    end: int | None = None
    """A's last stable offset; None: A did not answer."""

    @property
    def not_copied(self) -> int | None:
        """Offsets A holds that never reached B (a transaction's markers count as offsets); None: unknown."""
        if self.end is None or self.start is None:
            return None
        return max(0, self.end - max(self.copied or 0, self.start))


@dataclass(frozen=True)
class Failover:
    """What ``kmirror failover`` did, for its report."""

    state: FlowState
    recovery: list[PartitionRecovery]
    source_answered: bool

    @property
    def not_copied(self) -> int | None:
        """Offsets of A that never reached B, in all; None when A did not answer."""
        if not self.source_answered:
            return None
        return sum(p.not_copied or 0 for p in self.recovery)


def source_answers(source: KafkaClient) -> bool:
    """Whether A answers a metadata request. Refused credentials are no disaster: they raise,
    for the operator to fix, rather than pass for an A that is gone."""
    try:
        source.cluster_id()
        return True
    except AuthenticationError:
        raise
    except KMirrorError as exc:
        log.info("the source does not answer: %s", exc)
        return False


def fail_over(config: MirrorConfig, destination: KafkaClient, source: KafkaClient | None, *,
              max_wait_s: float) -> Failover:
    """Promote the destination: refused while the job runs or after a failover not failed back
    (:func:`~.presence.check_not_running`, :func:`~.flow.check_step`); then the job's
    transactional ids fenced, the promotion points and the copy's reach read, and the step
    recorded on the destination. ``source``: A's client if A answers, else None."""
    job = config.job_name
    flow = FlowLog(destination, job, max_wait_s=max_wait_s)
    presence = check_not_running(flow, "a failover")
    check_step(flow.state(), "failover", job)
    if presence is not None and presence.transactional_ids:
        fence_tasks(destination, job, presence.transactional_ids,
                    timeout_ms=int(config.delivery.transaction_timeout_s * 1000))
    topics = _job_topics(config, destination)
    try:
        copied = copied_state(destination, job, OffsetSyncStore(destination, offset_syncs_topic(job),
                                                                max_wait_s=max_wait_s), max_wait_s=max_wait_s)
        frontier = {tp: offset for tp, offset in copied.frontier.items() if config.clusters.selects(tp.topic)}
    except NoOffsetSyncsError:
        if not topics:
            raise
        frontier = {}  # nothing copied that the destination still knows of (syncs are kept a week)
    topics |= {tp.topic for tp in frontier}
    recovery = _recovery(config, source, frontier)
    if recovery is None:
        source = None
        recovery = [PartitionRecovery(tp, offset) for tp, offset in sorted(frontier.items())]
    promotion = _promotion_points(config, destination, topics)
    state = FlowState("failed-over", int(time.time() * 1000), promotion, dict(frontier),
                      source.cluster_id() if source is not None else None, destination.cluster_id(),
                      _ids_of(destination, {tp.topic for tp in promotion}))
    flow.record(state)
    return Failover(state, recovery, source is not None)


def _job_topics(config: MirrorConfig, destination: KafkaClient) -> set[str]:
    """The source topics the job copied into the destination as its provenance says (whose
    destination topic is named as this job names it): idle ones too, whose syncs are gone."""
    if PROVENANCE_TOPIC not in destination.topics():
        return set()
    named = config.clusters.destination_topic
    return {record.source_topic for topic, record in ProvenanceLog(destination).refresh().items()
            if mirrored(config, record.source_topic) and named(record.source_topic) == topic}


def _recovery(config: MirrorConfig, source: KafkaClient | None,
              frontier: Mapping[TopicPartition, int]) -> list[PartitionRecovery] | None:
    """Every partition of the source topics the job mirrors, copied or not (one it never copied
    reached B not at all); None when A does not answer, or answers only in part (a partition
    without a leader): the recovery point is then unknown."""
    if source is None:
        return None
    try:
        listings = selected_listings(config, source)
        tps = sorted({*frontier, *(TopicPartition(t, p) for t, listing in listings.items()
                                   for p in range(listing.partitions))})
        present = [tp for tp in tps if tp.topic in listings]
        ends = source.list_offsets(present, "latest", isolation_level=READ_COMMITTED) if present else {}
        starts = source.list_offsets(present, "earliest") if present else {}
    except AuthenticationError:
        raise
    except KMirrorError as exc:
        log.warning("the source answered, but not for every partition (%s): the recovery point is unknown", exc)
        return None
    return [PartitionRecovery(tp, frontier.get(tp), starts.get(tp), ends.get(tp)) for tp in tps]


def _ids_of(client: KafkaClient, topics: set[str]) -> dict[str, str]:
    """The ids of ``topics`` as ``client``'s cluster lists them now (those it gives one)."""
    return {topic: i for topic, i in listed_ids(client.listings()).items() if topic in topics}


def _promotion_points(config: MirrorConfig, destination: KafkaClient, topics: set[str]) -> dict[TopicPartition, int]:
    """B's last stable offset of every partition of the job's destination topics."""
    counts = destination.topics()
    named = {config.clusters.destination_topic(t) for t in topics}
    tps = [TopicPartition(t, p) for t in sorted(named) if t in counts for p in range(counts[t])]
    return destination.list_offsets(tps, "latest", isolation_level=READ_COMMITTED) if tps else {}
