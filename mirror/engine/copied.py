"""How far a job has copied each source partition, from what it keeps at its destination alone.

A failover reads it with the source down, and ``groups translate`` with the source up; both
need only the destination: the job's offset syncs (where each copied record landed) and,
exactly-once, its offsets topic (the source offsets committed with the records).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Iterable, Mapping

from kcodecs import KMirrorError

from ..kafka import KafkaClient, TopicPartition
from .offset_syncs import OffsetSyncStore, SyncEntry, offset_syncs_topic
from .offsets_topic import CommittedOffsets, offsets_topic

__all__ = ["CopiedState", "NoOffsetSyncsError", "copied_state", "copy_frontier"]


class NoOffsetSyncsError(KMirrorError):
    """The destination holds no offset syncs of the job: it has copied nothing that can be placed."""

    def __init__(self, topic: str, job: str, reason: str):
        super().__init__(f"no offset syncs on the destination: {topic} {reason}. Either the job {job} has copied "
                         f"nothing yet, or {job} is not the job's name (give its --name, or its --checkpoint)")
        self.topic = topic
        self.job = job


@dataclass(frozen=True)
class CopiedState:
    """The job's offset syncs, and per source partition the offset after the last one copied."""

    entries: list[SyncEntry]
    frontier: dict[TopicPartition, int]


def copy_frontier(entries: Iterable[SyncEntry], committed: Mapping[TopicPartition, int]) -> dict[TopicPartition, int]:
    """Per source partition, the offset after the last one copied: the highest of the syncs' and
    of the job's offsets topic (exactly-once), which also counts the transaction markers the copy
    drops, so a group that consumed up to a trailing marker is not taken for ahead of the copy."""
    frontier = dict(committed)
    for entry in entries:
        frontier[entry.source] = max(frontier.get(entry.source, 0), entry.last + 1)
    return frontier


def copied_state(destination: KafkaClient, job: str, syncs: OffsetSyncStore, *, max_wait_s: float) -> CopiedState:
    """The job's offset syncs, read into ``syncs`` as its driver reads them, and its copy
    frontier. Raises :class:`NoOffsetSyncsError` when the destination holds no sync and no
    commit of the job (an exactly-once job killed within a second of its first copy has
    committed offsets and written no sync yet)."""
    present = destination.topics()
    if offset_syncs_topic(job) not in present:
        raise NoOffsetSyncsError(offset_syncs_topic(job), job, "does not exist")
    entries = syncs.refresh()
    committed = (CommittedOffsets(destination, offsets_topic(job), max_wait_s=max_wait_s).refresh()
                 if offsets_topic(job) in present else {})
    if not entries and not committed:
        raise NoOffsetSyncsError(offset_syncs_topic(job), job, "is empty")
    return CopiedState(entries, copy_frontier(entries, committed))
