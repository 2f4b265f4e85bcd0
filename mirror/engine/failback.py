"""``kmirror failback``'s plan: copy home to A what was written at B since the failover, then
make A primary again (issue 71).

The failback is a job of its own, B -> A, made from the A -> B job's options
(:func:`failback_job`): named ``<job>-failback``, its checkpoint beside the job's, with its own
offsets, offset syncs and presence at A, exactly-once by default as any job. It writes into A's
same topics (``identity`` names only: a prefixed copy has no way home under one name).

- **Where it starts.** B's promotion points, from the failover's record on B
  (:class:`~.flow.FlowState`): records below them are A's, copied to B before the disaster.
  They are the reverse job's starts (:attr:`mirror.spark.source.KafkaRangeReader.starts`),
  below which nothing is copied, checkpoint or not. A topic made at B after the failover is
  B's own from its log start, and is copied home too.
- **Cycles.** B's provenance says the flow's topics came from A, which would leave them out
  (:mod:`.provenance`); records from the promotion point on are B's own, so the flow's topics
  are mirrored all the same (``clusters.flow_topics``).
- **Groups.** The reverse job's offset syncs at A are seeded with the inverse of the A -> B
  job's syncs below the promotion points (:func:`inverse_syncs`), as a takeover seeds MM2's,
  so a group that lagged at B is translated back to A exactly as well.
- **A's unreplicated tail.** What A acknowledged that never reached B: A's offsets from what
  the copy had reached at the failover up to the first record the failback wrote there
  (:func:`unreplicated_tail`). It stays on A only, and is said.
- **Finish** (:func:`finish_failback`): once the reverse copy caught up, A's last stable
  offsets are its promotion points, recorded on B as ``failed-back``. ``kmirror run`` A -> B
  then mirrors from them (:func:`resumed_flow`): what the failback wrote into A is never copied
  back to B.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from pathlib import Path
from typing import Mapping

from kcodecs import KMirrorError

from ..config import MirrorConfig
from ..kafka import IdempotentProducer, KafkaClient, TopicPartition
from ..kafka.client import READ_COMMITTED
from .commit import Committer
from .flow import FlowLog, FlowState, check_step
from .own_topics import create_own_topics
from .offset_syncs import OffsetSyncStore, SyncEntry, SyncLog, offset_syncs_topic
from .topics import selected_topics

__all__ = ["FAILBACK_SUFFIX", "Failback", "FailbackNamingError", "TailPartition", "failback_job", "plan_failback",
           "inverse_syncs", "unreplicated_tail", "finish_failback", "resumed_flow"]

FAILBACK_SUFFIX = "-failback"


class FailbackNamingError(KMirrorError):
    """A flow whose destination topics are named other than their sources: no way home under one name."""


@dataclass(frozen=True)
class Failback:
    """The reverse job of a failed-over flow, and where it starts."""

    job: str
    """The A -> B job's name: its flow's state is ``kmirror-flow.<job>`` on B."""
    config: MirrorConfig
    """The reverse job B -> A (:func:`failback_job`)."""
    failover: FlowState
    starts: dict[TopicPartition, int]
    """B's promotion points: the reverse job copies from there."""


@dataclass(frozen=True)
class TailPartition:
    """One partition of A's unreplicated tail: offsets ``[start, end)`` A holds that B never had."""

    tp: TopicPartition
    start: int
    end: int

    @property
    def count(self) -> int:
        return self.end - self.start


def failback_job(config: MirrorConfig, failover: FlowState) -> MirrorConfig:
    """The job B -> A of ``config``'s flow A -> B: the clusters swapped, named ``<job>-failback``,
    its checkpoint ``<checkpoint>-failback``, starting at B's log start where no promotion point
    says otherwise, the flow's topics mirrored though their provenance names A."""
    clusters = config.clusters
    if clusters.replication_policy != "identity" or clusters.rename != "{topic}":
        raise FailbackNamingError(f"job {config.job_name} names its destination topics other than their sources "
                                  f"({clusters.replication_policy}, rename {clusters.rename!r}): a failback copies "
                                  f"into the source's topics of the same names, under replication_policy identity "
                                  f"only; mirror the destination's topics back with a job of their own")
    swapped = clusters.model_copy(update={
        "source": clusters.destination, "destination": clusters.source, "source_alias": clusters.destination_alias,
        "destination_alias": clusters.source_alias,
        "flow_topics": tuple(sorted({tp.topic for tp in failover.promotion}))})
    checkpoint = Path(f"{config.streaming.checkpoint}{FAILBACK_SUFFIX}")
    reverse = config.model_copy(update={"clusters": swapped})
    reverse = reverse.replaced("streaming", checkpoint=checkpoint, starting_offsets="earliest")
    return reverse.replaced("delivery", name=config.job_name + FAILBACK_SUFFIX)


def plan_failback(config: MirrorConfig, b: KafkaClient, *, max_wait_s: float) -> Failback:
    """The failback of ``config``'s flow, refused unless the flow failed over
    (:func:`~.flow.check_step`)."""
    job = config.job_name
    state = FlowLog(b, job, max_wait_s=max_wait_s).state()
    check_step(state, "failback", job)
    assert state is not None
    return Failback(job, failback_job(config, state), state, dict(state.promotion))


def inverse_syncs(entries: list[SyncEntry], promotion: Mapping[TopicPartition, int]) -> SyncLog:
    """The A -> B job's syncs below B's promotion points, turned round: B's records there came
    from A's, an exact sync one for one, a bound to the first of its span (the group re-reads,
    never skips). Ids swap sides with the offsets."""
    out = []
    for e in sorted(entries, key=lambda e: (e.destination, e.base, e.source)):
        point = promotion.get(e.destination)
        if point is None or e.base >= point:
            continue
        end = min(e.end, point)
        last = e.first + (end - e.base) - 1 if e.exact else e.last
        out.append(SyncEntry(e.destination, e.base, end - 1, e.source, e.first, last + 1, e.exact,
                             topic_id=e.destination_id, destination_id=e.topic_id))
    return SyncLog.of(out)


def seed_syncs(failback: Failback, b: KafkaClient, a: KafkaClient, *, max_wait_s: float,
               timeout_ms: int) -> int:
    """Write :func:`inverse_syncs` as the reverse job's own first syncs at A, once: a reverse
    job that has syncs already (a restart) is left as it is. Returns how many were written."""
    reverse = offset_syncs_topic(failback.config.job_name)
    if reverse in a.topics() and OffsetSyncStore(a, reverse, max_wait_s=max_wait_s).refresh():
        return 0
    forward = offset_syncs_topic(failback.job)
    entries = OffsetSyncStore(b, forward, max_wait_s=max_wait_s).refresh() if forward in b.topics() else []
    seeded = inverse_syncs(entries, failback.starts)
    if not seeded.by_source():
        return 0
    create_own_topics(failback.config, a)
    producer = IdempotentProducer(a, timeout_ms=timeout_ms)
    try:
        Committer(producer, TopicPartition(reverse, 0)).commit({}, seeded)
    finally:
        producer.close()
    return sum(len(e) for e in seeded.entries.values())


def unreplicated_tail(failback: Failback, a: KafkaClient, *, max_wait_s: float) -> list[TailPartition]:
    """Per partition of A the flow copied from, the offsets A acknowledged that never reached
    B: from where the copy had reached at the failover to the first offset the failback wrote
    there (its syncs say where), or A's end while it wrote nothing there yet."""
    copied = {tp: offset for tp, offset in failback.failover.copied.items()}
    present = a.topics()
    tps = sorted(tp for tp in copied if tp.partition < present.get(tp.topic, 0))
    if not tps:
        return []
    reverse = offset_syncs_topic(failback.config.job_name)
    first: dict[TopicPartition, int] = {}
    if reverse in present:
        for e in OffsetSyncStore(a, reverse, max_wait_s=max_wait_s).refresh():
            if e.first >= failback.starts.get(e.source, 0):  # the failback's own, not the seeded ones
                first[e.destination] = min(first.get(e.destination, e.base), e.base)
    ends = a.list_offsets(tps, "latest", isolation_level=READ_COMMITTED)
    starts = a.list_offsets(tps, "earliest")
    tail = [TailPartition(tp, max(copied[tp], starts[tp]), first.get(tp, ends[tp])) for tp in tps]
    return [t for t in tail if t.count > 0]


def finish_failback(failback: Failback, b: KafkaClient, a: KafkaClient, *, max_wait_s: float) -> FlowState:
    """Record on B that A is primary again, once the reverse copy caught up: A's promotion
    points are its last stable offsets of every topic the failback copies into."""
    topics = selected_topics(failback.config, b)
    present = a.topics()
    at_a = [TopicPartition(t, p) for t in sorted(topics) if t in present for p in range(present[t])]
    at_b = [TopicPartition(t, p) for t, n in sorted(topics.items()) for p in range(n)]
    promotion = a.list_offsets(at_a, "latest", isolation_level=READ_COMMITTED) if at_a else {}
    copied = b.list_offsets(at_b, "latest", isolation_level=READ_COMMITTED) if at_b else {}
    state = FlowState("failed-back", int(time.time() * 1000), promotion, copied, a.cluster_id(), b.cluster_id())
    FlowLog(b, failback.job, max_wait_s=max_wait_s).record(state)
    return state


def resumed_flow(config: MirrorConfig, state: FlowState | None) -> tuple[MirrorConfig, dict[TopicPartition, int]]:
    """The A -> B job as it runs after a failback: from A's promotion points on (what is below
    came from B, or stayed on A only), with the flow's topics mirrored though A's provenance says
    they came from B. Unchanged, with no starts, for a flow that never failed back."""
    if state is None or state.step != "failed-back":
        return config, {}
    topics = tuple(sorted({tp.topic for tp in state.promotion}))
    return config.replaced("clusters", flow_topics=topics), dict(state.promotion)
