"""``kmirror failover``'s work: promote the destination B of a flow A -> B (issue 71).

It needs only B: the job's offset syncs and offsets there say how far each source partition
was copied (:mod:`.copied`), and B's own ends are the promotion points (:class:`~.flow.FlowState`).
A, if it answers, adds the recovery point: per source partition, the records A holds that
never reached B. A that does not answer is the disaster's usual case, and the report says
"unknown" rather than guess.

The promotion point is B's last stable offset: records after it at the moment of the
failover can only be those of a transaction the stopped job left open, which B's coordinator
aborts; what producers write at B from then on comes after it.
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass
from typing import Mapping

from kcodecs import KMirrorError

from ..config import MirrorConfig
from ..kafka import KafkaClient, TopicPartition
from ..kafka.client import READ_COMMITTED
from .copied import copied_state
from .flow import FlowLog, FlowState, check_step
from .offset_syncs import OffsetSyncStore, offset_syncs_topic
from .presence import check_not_running
from .topics import selected_listings

__all__ = ["Failover", "PartitionRecovery", "fail_over", "source_answers"]

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class PartitionRecovery:
    """One source partition at the failover: how far it was copied, and what A holds past it."""

    source: TopicPartition
    copied: int
    """The offset after the last one copied into B (the log start where nothing was)."""
    end: int | None
    """A's last stable offset; None: A did not answer."""

    @property
    def not_copied(self) -> int | None:
        """Offsets A holds that never reached B (a transaction's markers count as offsets); None: unknown."""
        return None if self.end is None else max(0, self.end - self.copied)


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
    """Whether A answers a metadata request (its client's retries, then no)."""
    try:
        source.cluster_id()
        return True
    except KMirrorError as exc:
        log.info("the source does not answer: %s", exc)
        return False


def fail_over(config: MirrorConfig, destination: KafkaClient, source: KafkaClient | None, *,
              max_wait_s: float) -> Failover:
    """Promote the destination: refused while the job runs or after a failover not failed back
    (:func:`~.presence.check_not_running`, :func:`~.flow.check_step`); then the promotion
    points and the copy's reach read, and the step recorded on the destination. ``source``:
    A's client if A answers, else None."""
    job = config.job_name
    flow = FlowLog(destination, job, max_wait_s=max_wait_s)
    check_not_running(flow, "a failover")
    check_step(flow.state(), "failover", job)
    copied = copied_state(destination, job, OffsetSyncStore(destination, offset_syncs_topic(job),
                                                            max_wait_s=max_wait_s), max_wait_s=max_wait_s)
    frontier = {tp: offset for tp, offset in copied.frontier.items() if config.clusters.selects(tp.topic)}
    recovery = _recovery(config, source, frontier) if source is not None else [
        PartitionRecovery(tp, offset, None) for tp, offset in sorted(frontier.items())]
    promotion = _promotion_points(config, destination, {p.source.topic for p in recovery})
    state = FlowState("failed-over", int(time.time() * 1000), promotion,
                      {p.source: p.copied for p in recovery},
                      source.cluster_id() if source is not None else None, destination.cluster_id())
    flow.record(state)
    return Failover(state, recovery, source is not None)


def _recovery(config: MirrorConfig, source: KafkaClient, frontier: Mapping[TopicPartition, int]) -> list[PartitionRecovery]:
    """Every partition of the source topics the job mirrors, copied or not: one it never copied
    reached B not at all, from its log start."""
    listings = selected_listings(config, source)
    tps = sorted({*frontier, *(TopicPartition(t, p) for t, listing in listings.items()
                               for p in range(listing.partitions))})
    present = [tp for tp in tps if tp.topic in listings]
    ends = source.list_offsets(present, "latest", isolation_level=READ_COMMITTED) if present else {}
    starts = source.list_offsets(present, "earliest") if present else {}
    return [PartitionRecovery(tp, max(frontier.get(tp, 0), starts.get(tp, 0)), ends.get(tp)) for tp in tps]


def _promotion_points(config: MirrorConfig, destination: KafkaClient, topics: set[str]) -> dict[TopicPartition, int]:
    """B's last stable offset of every partition of the job's destination topics."""
    counts = destination.topics()
    named = {config.clusters.destination_topic(t) for t in topics}
    tps = [TopicPartition(t, p) for t in sorted(named) if t in counts for p in range(counts[t])]
    return destination.list_offsets(tps, "latest", isolation_level=READ_COMMITTED) if tps else {}
