"""Consumer-group offset translation: groups' committed source offsets, committed again at the
destination where the same records lie (MirrorMaker 2's checkpoints and ``sync.group.offsets``,
made exact where the data was forwarded).

Run by the driver every ``sync_group_offsets_interval_s`` for the groups matching ``groups``:

1. read the offset syncs the copy tasks committed (:class:`~.offset_syncs.OffsetSyncStore`);
2. for each matching group at the source, its committed offsets for mirrored topics,
   translated to destination offsets (:meth:`~.offset_syncs.OffsetSyncStore.translate`);
3. MirrorMaker 2's rules: a group with members at the destination is left alone (committing
   would fight its consumers), and a destination offset never moves backwards;
4. the rest committed to the same group at the destination, from outside the group.

A group offset past what the mirror has copied is clamped to the copy's frontier (the group
resumes where the copy is, and reads what the copy brings next), never invented.
"""

from __future__ import annotations

import logging
import re
import time
from dataclasses import dataclass, field
from typing import Callable, Mapping

from ..kafka import KafkaClient, TopicPartition
from ..kafka.groups import GroupAdmin
from .offset_syncs import OffsetSyncStore, Precision

__all__ = ["GroupOffsetSync", "GroupSyncReport"]

log = logging.getLogger(__name__)


@dataclass
class GroupSyncReport:
    """What one round of translation did, for the progress line."""

    synced: list[str] = field(default_factory=list)
    skipped: dict[str, str] = field(default_factory=dict)
    """Group -> why it was left alone."""
    exact: int = 0
    conservative: int = 0
    """Partitions committed below the exact position (rebuilt or re-partitioned data): re-read, never skipped."""
    unchanged: int = 0
    """Partitions whose destination offset was already there or later."""
    translation_lag: int = 0
    """Source offsets the groups had consumed past what the mirror had copied (clamped)."""

    def line(self) -> str:
        parts = [f"groups {len(self.synced)} synced ({self.exact} partitions exact, "
                 f"{self.conservative} conservative, {self.unchanged} unchanged)"]
        if self.skipped:
            parts.append(f"{len(self.skipped)} left alone ({', '.join(sorted(self.skipped))})")
        parts.append(f"translation lag {self.translation_lag}")
        return ", ".join(parts)


class GroupOffsetSync:
    """Translation rounds for the groups matching ``pattern``, between two clusters."""

    def __init__(self, pattern: str, source: KafkaClient, destination: KafkaClient, syncs: OffsetSyncStore, *,
                 interval_s: float, mirrored: Callable[[str], bool], clock: Callable[[], float] = time.monotonic):
        self._pattern = re.compile(pattern)
        self._source = GroupAdmin(source)
        self._destination = GroupAdmin(destination)
        self._syncs = syncs
        self._interval_s = interval_s
        self._mirrored = mirrored
        self._clock = clock
        self._last_run: float | None = None

    def due(self) -> bool:
        return self._last_run is None or self._clock() - self._last_run >= self._interval_s

    def run(self, copied_to: Mapping[TopicPartition, int]) -> GroupSyncReport:
        """One round: every matching group translated (or left alone, with the reason logged)."""
        self._last_run = self._clock()
        self._syncs.refresh()
        report = GroupSyncReport()
        for group in self._source.list_groups():
            if self._pattern.fullmatch(group):
                self._sync(group, copied_to, report)
        return report

    def _sync(self, group: str, copied_to: Mapping[TopicPartition, int], report: GroupSyncReport) -> None:
        offsets = {tp: offset for tp, offset in self._source.committed(group).items() if self._mirrored(tp.topic)}
        translated = self._syncs.translate(offsets, copied_to)
        if not translated:
            return
        there = self._destination.describe(group)
        if there.active:
            report.skipped[group] = f"{there.members} members, {there.state}"
            log.info("group %s left alone: it is active at the destination (%d members, %s); its consumers own "
                     "its offsets there", group, there.members, there.state)
            return
        current = self._destination.committed(group)
        moved = {tp: t.offset for tp, t in translated.items() if t.offset > current.get(tp, -1)}
        self._destination.commit(group, moved, metadata="kmirror")
        report.synced.append(group)
        report.unchanged += len(translated) - len(moved)
        for tp in moved:
            if translated[tp].precision is Precision.EXACT:
                report.exact += 1
            else:
                report.conservative += 1
        report.translation_lag += sum(max(0, offset - copied_to[tp]) for tp, offset in offsets.items()
                                      if tp in copied_to)
        log.debug("group %s: committed %s at the destination", group, moved)
