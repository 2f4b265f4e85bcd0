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
  (:mod:`.provenance`); records from the promotion point on are B's own, so the failback
  mirrors the flow's topics all the same (``clusters.flow_topics``).
- **Groups.** The reverse job's offset syncs at A are seeded with the inverse of the A -> B
  job's syncs below the promotion points (:func:`inverse_syncs`), as a takeover seeds MM2's,
  so a group that lagged at B is translated back to A exactly as well.
- **A's unreplicated tail.** What A acknowledged that never reached B: A's offsets from what
  the copy had reached at the failover up to the first record the failback wrote there
  (:func:`unreplicated_tail`). Without ``--reconcile`` it stays on A only, and is said. With it,
  before the failback's first copy, the A -> B job copies the tail into B once
  (:func:`reconcile_job`; step ``reconcile``, the one run a failed-over flow allows), after
  what B took meanwhile; its syncs say where each tail batch landed in B, and the failback
  skips those spans (:func:`reconciled_spans`), so A never gets its own records back.
- **Finish** (:func:`finish_failback`): once the reverse copy caught up, A's last stable
  offsets are its promotion points, recorded on B as ``failed-back``, and A's provenance of the
  flow's topics is put back as it was before the failback wrote it. ``kmirror run`` A -> B then
  mirrors from them (:func:`resumed_starts`): what the failback wrote into A is never copied
  back to B.
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Mapping

from kcodecs import KMirrorError

from ..config import MirrorConfig
from ..config.sections import Takeover
from ..kafka import IdempotentProducer, KafkaClient, TopicPartition
from ..kafka.admin import describe_topic_configs
from ..kafka.client import READ_COMMITTED
from ..kafka.types import listed_ids
from .commit import Committer
from .copied import NoOffsetSyncsError, copied_state
from .flow import FlowLog, FlowState, FlowStepError, check_step
from .own_topics import create_own_topics
from .offset_syncs import OffsetSyncStore, SyncEntry, SyncLog, offset_syncs_topic
from .provenance import PROVENANCE_TOPIC, ProvenanceLog
from .topics import selected_topics

__all__ = ["FAILBACK_SUFFIX", "Failback", "FailbackNamingError", "TailPartition", "failback_job", "plan_failback",
           "inverse_syncs", "seed_syncs", "reconciled_spans", "skipping", "reconcile_job", "tail_to_reconcile", "unreplicated_tail",
           "failback_firsts",
           "finish_failback", "resumed_starts"]

log = logging.getLogger(__name__)

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
    reconciled: bool = False
    """The A -> B job copied it into B since (``failback --reconcile``)."""

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
        "flow_topics": _flow_topics(failover)})
    checkpoint = Path(f"{config.streaming.checkpoint}{FAILBACK_SUFFIX}")
    reverse = config.model_copy(update={"clusters": swapped, "takeover": Takeover()})  # nothing of MM2's here
    reverse = reverse.replaced("streaming", checkpoint=checkpoint, starting_offsets="earliest")
    return reverse.replaced("delivery", name=config.job_name + FAILBACK_SUFFIX)


def plan_failback(config: MirrorConfig, b: KafkaClient, *, max_wait_s: float) -> Failback:
    """The failback of ``config``'s flow, refused unless the flow failed over
    (:func:`~.flow.check_step`)."""
    job = config.job_name
    state = FlowLog(b, job, max_wait_s=max_wait_s).state()
    check_step(state, "failback", job)
    assert state is not None
    return Failback(job, failback_job(config, state), state, state.points_of(listed_ids(b.listings())))


def inverse_syncs(entries: list[SyncEntry]) -> SyncLog:
    """The A -> B job's syncs turned round: B's records there came from A's, an exact sync one
    for one, a bound to the first of its span (a group re-reads, never skips). Those below B's
    promotion points place what B held at the failover, those above it a reconciled tail.
    Ids swap sides with the offsets."""
    return SyncLog.of(SyncEntry(e.destination, e.base, e.end - 1, e.source, e.first, e.last + 1, e.exact,
                                topic_id=e.destination_id, destination_id=e.topic_id)
                      for e in sorted(entries, key=lambda e: (e.destination, e.base, e.source)))


def _forward_syncs(failback: Failback, b: KafkaClient, *, max_wait_s: float) -> list[SyncEntry]:
    forward = offset_syncs_topic(failback.job)
    return OffsetSyncStore(b, forward, max_wait_s=max_wait_s).refresh() if forward in b.topics() else []


def _reverse_syncs(failback: Failback, a: KafkaClient, *, max_wait_s: float) -> list[SyncEntry]:
    reverse = offset_syncs_topic(failback.config.job_name)
    return OffsetSyncStore(a, reverse, max_wait_s=max_wait_s).refresh() if reverse in a.topics() else []


def seed_syncs(failback: Failback, b: KafkaClient, a: KafkaClient, *, max_wait_s: float,
               timeout_ms: int) -> int:
    """Write :func:`inverse_syncs` as the reverse job's own syncs at A, those it has not
    already (a restart, or a reconcile since the first start). Returns how many were written."""
    have = _reverse_syncs(failback, a, max_wait_s=max_wait_s)
    create_own_topics(failback.config, a)
    return _write_missing(inverse_syncs(_forward_syncs(failback, b, max_wait_s=max_wait_s)), have, a,
                          offset_syncs_topic(failback.config.job_name), timeout_ms=timeout_ms)


def _write_missing(syncs: SyncLog, have: list[SyncEntry], client: KafkaClient, topic: str, *, timeout_ms: int) -> int:
    """Write the entries of ``syncs`` that ``have`` lacks to the syncs topic ``topic``, as a
    job's commits write them; returns how many."""
    known = {_span(e) for e in have}
    missing = SyncLog.of(e for entries in syncs.entries.values() for e in entries if _span(e) not in known)
    if not missing.by_source():
        return 0
    producer = IdempotentProducer(client, timeout_ms=timeout_ms)
    try:
        Committer(producer, TopicPartition(topic, 0)).commit({}, missing)
    finally:
        producer.close()
    return sum(len(e) for e in missing.entries.values())


def _own_syncs(failback: Failback, a: KafkaClient, forward: list[SyncEntry], *, max_wait_s: float) -> list[SyncEntry]:
    """The failback's syncs of its own copies: not those seeded from ``forward``, the A -> B job's."""
    seeded = {_span(e) for entries in inverse_syncs(forward).entries.values() for e in entries}
    return [e for e in _reverse_syncs(failback, a, max_wait_s=max_wait_s) if _span(e) not in seeded]


def _span(entry: SyncEntry) -> tuple[TopicPartition, int, int]:
    """What tells one sync from another here: its source partition and offsets (a sync read
    back is the same entry as the one written, ids and all)."""
    return entry.source, entry.first, entry.last


def reconciled_spans(failback: Failback, b: KafkaClient, *,
                     max_wait_s: float) -> dict[TopicPartition, tuple[tuple[int, int], ...]]:
    """Per partition of B, the spans where a reconcile put A's tail (the A -> B job's syncs of
    what it copied past the failover's copy), for the failback to skip."""
    copied = failback.failover.copied
    spans: dict[TopicPartition, list[tuple[int, int]]] = {}
    for e in _forward_syncs(failback, b, max_wait_s=max_wait_s):
        if e.first >= copied.get(e.source, 0) and e.base >= failback.starts.get(e.destination, 0):
            if not e.exact:  # --reconcile refuses the pairs that rebuild batches (_rebuilt_pairs)
                raise FlowStepError(f"the reconcile's copy of {e.source} into {e.destination} [{e.base}, {e.end}) "
                                    f"was rebuilt: the span may hold records of the destination's own, and the "
                                    f"failback cannot skip it exactly")
            spans.setdefault(e.destination, []).append((e.base, e.end))
    return {tp: _merged(found) for tp, found in spans.items()}


def _merged(spans: list[tuple[int, int]]) -> tuple[tuple[int, int], ...]:
    out: list[tuple[int, int]] = []
    for first, end in sorted(spans):
        if out and first <= out[-1][1]:
            out[-1] = (out[-1][0], max(out[-1][1], end))
        else:
            out.append((first, end))
    return tuple(out)


def skipping(reverse: MirrorConfig, skips: Mapping[TopicPartition, tuple[tuple[int, int], ...]]) -> MirrorConfig:
    """The reverse job as it runs with ``skips``: resident copiers follow a partition to its
    end between micro-batches, past any span the plan skips, so a failback that skips a
    reconciled tail copies micro-batch by micro-batch instead."""
    if not skips or not reverse.streaming.copy_between_micro_batches:
        return reverse
    log.info("the failback skips the reconciled tail at the destination (%s): copying micro-batch by micro-batch, "
             "without resident copiers", ", ".join(f"{tp} {list(spans)}" for tp, spans in sorted(skips.items())))
    return reverse.replaced("streaming", copy_between_micro_batches=False)


def reconcile_job(config: MirrorConfig, failback: Failback) -> MirrorConfig:
    """The A -> B job as ``failback --reconcile`` runs it: once, to A's end (the tail: the
    failback has written nothing into A yet), from where the failover's copy had reached; the
    flow's topics mirrored though A's provenance, if a failback started before, says they came
    from B."""
    return config.replaced("streaming", once=True).replaced("clusters", flow_topics=_flow_topics(failback.failover))


def _flow_topics(state: FlowState) -> tuple[str, ...]:
    """The flow's topics: those of its promotion points (the names are the same on both sides)."""
    return tuple(sorted({tp.topic for tp in state.promotion}))


def tail_to_reconcile(config: MirrorConfig, failback: Failback, a: KafkaClient, b: KafkaClient, *,
                      max_wait_s: float) -> list[TailPartition]:
    """What of A's unreplicated tail ``--reconcile`` still has to copy into B. Refused (a
    :class:`~.flow.FlowStepError`) at-least-once, where a copy may leave records at B that no
    sync names (the failback would copy them back), and once the failback has copied into A:
    the tail's end is then behind records of B's, which the A -> B job would copy back."""
    pending = [t for t in unreplicated_tail(failback, a, b, max_wait_s=max_wait_s) if not t.reconciled]
    if not pending:
        return []
    rebuilt = _rebuilt_pairs(failback, a, b, {t.tp.topic for t in pending})
    if rebuilt:
        raise FlowStepError(f"--reconcile needs every batch of the tail copied as it is, so that the failback can "
                            f"skip exactly its spans at the destination; the copy rebuilds batches of {', '.join(rebuilt)} "
                            f"(by-key partitioning, or a compacted topic's offset holes): go on without it (the tail "
                            f"stays on the source only)")
    if config.delivery.mode != "exactly-once":
        raise FlowStepError("--reconcile copies under exactly-once only: an at-least-once copy can leave records at "
                            "the destination that no offset sync names, and the failback would copy them back")
    if failback_firsts(failback, a, _forward_syncs(failback, b, max_wait_s=max_wait_s), max_wait_s=max_wait_s):
        raise FlowStepError(f"the failback of job {failback.job} has copied into the source already: --reconcile "
                            f"goes before its first copy; go on without it (the tail stays on the source only)")
    return pending


def _rebuilt_pairs(failback: Failback, a: KafkaClient, b: KafkaClient, topics: set[str]) -> list[str]:
    """Of ``topics``, those whose copy into B rebuilds batches: by-key pairs, and compacted
    topics (compaction leaves offset holes, and a batch with holes is rebuilt)."""
    pairs = ProvenanceLog(b).refresh() if PROVENANCE_TOPIC in b.topics() else {}
    configs = describe_topic_configs(a, sorted(topics))
    return sorted(t for t in topics if (pairs.get(t) is not None and pairs[t].partitioning == "by-key")
                  or "compact" in configs.get(t, {}).get("cleanup.policy", ""))


def unreplicated_tail(failback: Failback, a: KafkaClient, b: KafkaClient, *,
                      max_wait_s: float) -> list[TailPartition]:
    """Per partition of A the flow copied from, the offsets A acknowledged that never reached
    B before the disaster: from where the copy had reached at the failover to the first offset
    the failback wrote there (its syncs say where), or A's end while it wrote nothing there
    yet; each marked reconciled once the A -> B job's copy reached its end."""
    copied = dict(failback.failover.copied)
    present = a.topics()
    tps = sorted(tp for tp in copied if tp.partition < present.get(tp.topic, 0))
    if not tps:
        return []
    try:  # the job's syncs and, exactly-once, its commits, which count the markers the copy drops
        copied_now = copied_state(b, failback.job, OffsetSyncStore(b, offset_syncs_topic(failback.job),
                                                                   max_wait_s=max_wait_s), max_wait_s=max_wait_s)
        forward, reached = copied_now.entries, copied_now.frontier
    except NoOffsetSyncsError:
        forward, reached = [], {}
    first = failback_firsts(failback, a, forward, max_wait_s=max_wait_s)
    ends = a.list_offsets(tps, "latest", isolation_level=READ_COMMITTED)
    starts = a.list_offsets(tps, "earliest")
    tail = [TailPartition(tp, max(copied[tp], starts[tp]), first.get(tp, ends[tp])) for tp in tps]
    return [replace(t, reconciled=reached.get(t.tp, 0) >= t.end) for t in tail if t.count > 0]


def failback_firsts(failback: Failback, a: KafkaClient, forward: list[SyncEntry], *,
                    max_wait_s: float) -> dict[TopicPartition, int]:
    """Per partition of A, the first offset the failback copied there (none: it copied nothing
    there yet): its own syncs, not those seeded from ``forward``, the A -> B job's."""
    first: dict[TopicPartition, int] = {}
    for e in _own_syncs(failback, a, forward, max_wait_s=max_wait_s):
        first[e.destination] = min(first.get(e.destination, e.base), e.base)
    return first


def finish_failback(failback: Failback, b: KafkaClient, a: KafkaClient, *, max_wait_s: float,
                    timeout_ms: int) -> FlowState:
    """Record on B that A is primary again, once the reverse copy caught up: A's promotion
    points are its last stable offsets of every topic the failback copies into. The A -> B
    job's syncs get the failback's turned round first, so that a group whose offsets at A lie
    among the records the failback wrote there translates back to B exactly too."""
    topics = selected_topics(failback.config, b)
    present = a.topics()
    at_a = [TopicPartition(t, p) for t in sorted(topics) if t in present for p in range(present[t])]
    at_b = [TopicPartition(t, p) for t, n in sorted(topics.items()) for p in range(n)]
    promotion = a.list_offsets(at_a, "latest", isolation_level=READ_COMMITTED) if at_a else {}
    copied = b.list_offsets(at_b, "latest", isolation_level=READ_COMMITTED) if at_b else {}
    ids = {topic: i for topic, i in listed_ids(a.listings()).items() if topic in topics}
    _restore_provenance(failback, b, a, set(topics), max_wait_s=max_wait_s)
    forward = _forward_syncs(failback, b, max_wait_s=max_wait_s)
    _write_missing(inverse_syncs(_own_syncs(failback, a, forward, max_wait_s=max_wait_s)), forward, b,
                   offset_syncs_topic(failback.job), timeout_ms=timeout_ms)
    state = FlowState("failed-back", int(time.time() * 1000), promotion, copied, a.cluster_id(), b.cluster_id(), ids)
    FlowLog(b, failback.job, max_wait_s=max_wait_s).record(state)
    return state


def _restore_provenance(failback: Failback, b: KafkaClient, a: KafkaClient, topics: set[str], *,
                        max_wait_s: float) -> None:
    """A's provenance of the flow's topics as it was before the failback wrote it (which says
    their records came from B): from A's promotion points on they are A's own, so every
    command of the A -> B job (run, status, verify, groups) mirrors them again. The path is
    B's without its last hop, A (a topic made at B during the failover: A's own, no path); a
    topic that came to B from a third cluster keeps the failback's."""
    if PROVENANCE_TOPIC not in a.topics():
        return
    log_a = ProvenanceLog(a, max_wait_s=max_wait_s)
    at_a = dict(log_a.refresh())
    at_b = ProvenanceLog(b, max_wait_s=max_wait_s).refresh() if PROVENANCE_TOPIC in b.topics() else {}
    a_id = a.cluster_id()
    restored = {}
    for topic in sorted(topics & set(at_a)):
        upstream = at_b.get(topic)
        if upstream is not None and upstream.path[-1:] != (a_id,):
            continue  # came to B from elsewhere: it stays as the failback wrote it, from B
        path = () if upstream is None else upstream.path[:-1]
        if at_a[topic].path != path:
            restored[topic] = replace(at_a[topic], path=path)
    log_a.record(restored)


def resumed_starts(state: FlowState | None, ids: Mapping[str, str]) -> dict[TopicPartition, int]:
    """Where the A -> B job starts after a failback: A's promotion points (what is below came
    from B, or stayed on A only), checkpoint or not; none of a topic made again at A since
    (``ids``: A's topic ids now), whose offsets start again. None for a flow that never failed back."""
    if state is None or state.step != "failed-back":
        return {}
    return state.points_of(ids)
