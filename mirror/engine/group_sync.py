"""Consumer-group offset translation: groups' committed source offsets, committed again at the
destination where the same records lie (MirrorMaker 2's checkpoints and ``sync.group.offsets``,
made exact where the data was forwarded).

Run by the driver every ``sync.group_offsets_interval_s`` for the groups matching ``groups``:

1. read the offset syncs the copy tasks committed (:class:`~.offset_syncs.OffsetSyncStore`);
2. for each matching group at the source, its committed offsets for mirrored topics,
   translated to destination offsets (:meth:`~.offset_syncs.OffsetSyncStore.translate`);
3. MirrorMaker 2's rules: a group with members at the destination is left alone (committing
   would fight its consumers), and a destination offset never moves backwards;
4. the rest committed to the same group at the destination, from outside the group.

A group offset past what the mirror has copied is clamped to the copy's frontier (the group
resumes where the copy is, and reads what the copy brings next), never invented.

Steps 2 and 3 are :meth:`GroupOffsetSync.translate`, which commits nothing, and step 4 is
:meth:`GroupOffsetSync.commit`: ``kmirror groups translate`` (:mod:`mirror.groups_cli`) runs
them one group at a time, to show a failover before making it, with the job's rules.
"""

from __future__ import annotations

import logging
import re
import time
from dataclasses import dataclass, field
from typing import Callable, Mapping

from ..kafka import KafkaClient, TopicPartition
from ..kafka.types import listed_ids
from ..kafka.groups import GroupAdmin, GroupDescription
from .offset_syncs import OffsetSyncStore, Precision, Translation

__all__ = ["GroupOffsetSync", "GroupSyncReport", "GroupTranslation"]

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


@dataclass(frozen=True)
class GroupTranslation:
    """One group translated, nothing committed yet: what a round would commit, and why not."""

    group: str
    source_offsets: Mapping[TopicPartition, int]
    """Its committed offsets at the source, partitions of mirrored topics only."""
    translated: Mapping[TopicPartition, Translation]
    """Destination partition -> where the group resumes there."""
    destination: GroupDescription | None = None
    """The group at the destination; not asked (None) when nothing was translated."""
    committed: Mapping[TopicPartition, int] = field(default_factory=dict)
    """Its offsets at the destination; read only when it is not active there."""

    @property
    def active(self) -> bool:
        """Members at the destination: their offsets are theirs, so nothing is committed."""
        return self.destination is not None and self.destination.active

    @property
    def moves(self) -> dict[TopicPartition, int]:
        """What committing writes: the translated offsets ahead of the destination's (as
        MirrorMaker 2, never a destination offset backwards); nothing for an active group."""
        if self.active:
            return {}
        return {tp: t.offset for tp, t in self.translated.items() if t.offset > self.committed.get(tp, -1)}


class GroupOffsetSync:
    """Translation rounds for the groups matching ``pattern``, between two clusters."""

    def __init__(self, pattern: str, source: KafkaClient, destination: KafkaClient, syncs: OffsetSyncStore, *,
                 interval_s: float, mirrored: Callable[[str], bool], clock: Callable[[], float] = time.monotonic):
        self._pattern = re.compile(pattern)
        self._source = GroupAdmin(source)
        self._source_client = source
        self._destination = GroupAdmin(destination)
        self._destination_client = destination
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
        topic_ids, destination_ids = self.topic_ids(), self.destination_ids()
        for group in self.groups():
            self._sync(self.translate(group, copied_to, topic_ids, destination_ids), copied_to, report)
        return report

    def topic_ids(self) -> dict[str, str]:
        """Each source topic's id as the source lists it now: translation uses the syncs of that
        topic only, not those of one deleted before it under the name."""
        return listed_ids(self._source_client.listings())

    def destination_ids(self) -> dict[str, str]:
        """Each destination topic's id as the destination lists it now: translation uses the
        syncs into that topic only, not those into one lost before it under the name."""
        return listed_ids(self._destination_client.listings())

    def groups(self) -> list[str]:
        """The source's groups that the pattern matches (whole names)."""
        return [group for group in self._source.list_groups() if self._pattern.fullmatch(group)]

    def translate(self, group: str, copied_to: Mapping[TopicPartition, int],
                  topic_ids: Mapping[str, str] | None = None,
                  destination_ids: Mapping[str, str] | None = None) -> GroupTranslation:
        """``group``'s source offsets translated with the syncs read so far (of the topics of
        ``topic_ids``, default: :meth:`topic_ids`), and the group at the destination where that
        matters (something was translated); nothing is committed."""
        offsets = {tp: offset for tp, offset in self._source.committed(group).items() if self._mirrored(tp.topic)}
        translated = self._syncs.translate(offsets, copied_to, self.topic_ids() if topic_ids is None else topic_ids,
                                           self.destination_ids() if destination_ids is None else destination_ids)
        if not translated:
            return GroupTranslation(group, offsets, translated)
        there = self._destination.describe(group)
        if there.active:
            return GroupTranslation(group, offsets, translated, there)
        return GroupTranslation(group, offsets, translated, there, self._destination.committed(group))

    def commit(self, translation: GroupTranslation) -> dict[TopicPartition, int]:
        """Commit ``translation``'s moves at the destination, from outside the group; return them."""
        moved = translation.moves
        self._destination.commit(translation.group, moved, metadata="kmirror")
        return moved

    def _sync(self, translation: GroupTranslation, copied_to: Mapping[TopicPartition, int],
              report: GroupSyncReport) -> None:
        group, translated, there = translation.group, translation.translated, translation.destination
        if not translated:
            return
        if translation.active:
            report.skipped[group] = f"{there.members} members, {there.state}"
            log.info("group %s left alone: it is active at the destination (%d members, %s); its consumers own "
                     "its offsets there", group, there.members, there.state)
            return
        moved = self.commit(translation)
        report.synced.append(group)
        report.unchanged += len(translated) - len(moved)
        for tp in moved:
            if translated[tp].precision is Precision.EXACT:
                report.exact += 1
            else:
                report.conservative += 1
        report.translation_lag += sum(max(0, offset - copied_to[tp])
                                      for tp, offset in translation.source_offsets.items() if tp in copied_to)
        log.debug("group %s: committed %s at the destination", group, moved)
