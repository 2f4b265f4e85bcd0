"""``kmirror groups translate``: where consumer groups resume at the destination, shown before a
failover and, with --apply, committed there (MirrorMaker 2's RemoteClusterUtils.translateOffsets).

It reads what ``kmirror run`` wrote, with the job's own code: the offset syncs in
kmirror-offset-syncs.NAME on the destination, translated as the job's --groups translation
does, and the groups' committed offsets at the source. It changes nothing without --apply. It
takes every option of ``kmirror run`` (those not listed below are accepted and ignored), so the
job's --config file and flags name the clusters, the job and its topics; NAME is --name, or
derived from --checkpoint as the job derives it.

One row per group and source partition it has committed an offset for (mirrored topics only):
  SOURCE-OFFSET       the group's committed offset at the source: the next record it reads
  DESTINATION-*       the destination partition and offset it resumes at; '-': not translated
                      (nothing of that partition copied yet, its offset older than the syncs
                      kept, or its destination partition also fed by a partition the group has
                      no offset for)
  PRECISION           exact: no record read twice, none skipped; conservative (rebuilt batches,
                      or several source partitions feed one destination partition under
                      by-key): some records read again, none skipped
  COPIED              yes: the mirror has copied up to the source offset; no: the group is ahead
                      of the copy, and resumes at the destination where the copy is, so it reads
                      again the records the copy brings next
A destination partition fed by several source partitions shows once for each.

--apply commits the translated offsets to the same groups at the destination, with the job's
rules: a group with members there is left alone (its consumers own its offsets), and no
destination offset moves backwards. Stop the group's consumers at the source first: what they
commit later is not translated until the job's next round or another --apply.

Exit codes: 0 done (groups left alone included); 1 a broker refused a read or a commit; 2
invalid configuration or no --groups, a cluster unreachable after retries or credentials
refused, no source group matching --groups, or no offset syncs (the job has copied nothing
yet, or --name/--checkpoint is not the job's).
"""

from __future__ import annotations

import argparse
import functools
import logging
from dataclasses import dataclass
from typing import TYPE_CHECKING, Iterable, Mapping

from kcodecs import KMirrorError

from . import options
from .columns import columns
from .exits import EXIT_UNUSABLE, exit_code
from .kafka import TopicPartition

if TYPE_CHECKING:  # the engine is imported when the command runs, as `kmirror run` does
    from .config import MirrorConfig
    from .engine.group_sync import GroupTranslation
    from .engine.offset_syncs import SyncEntry, Translation

__all__ = ["add_arguments", "run", "translate_groups", "NoMatchingGroupError", "TranslationRow", "destinations_of", "rows", "table",
           "HEADER"]

log = logging.getLogger("kmirror")

_SHOWN = frozenset({"clusters.source", "clusters.destination", "clusters.topics", "clusters.exclude", "sync.groups",
                    "streaming.checkpoint", "delivery.name", "delivery.transaction_timeout_s", "limits.retry"})
"""The ``kmirror run`` settings this command uses (the clusters and their security among them);
the others are accepted, ignored and not listed."""
_HELP = {
    "clusters.topics": "the job's --topics: only offsets of the source topics it mirrors are translated",
    "clusters.exclude": "the job's --exclude",
    "sync.groups": "consumer groups to translate (whole-name match against the source's groups; required)",
    "streaming.checkpoint": "the job's Spark checkpoint directory, which names the job when --name is not given",
    "delivery.name": "the job's --name: its offset syncs are kmirror-offset-syncs.NAME on the destination",
    "delivery.transaction_timeout_s": "the job's --transaction-timeout: syncs behind an open transaction of a "
                                      "running job are waited for up to twice this (default 60)",
}
"""Help that says what an option means here rather than to ``kmirror run``."""
HEADER = ("GROUP", "TOPIC", "PARTITION", "SOURCE-OFFSET", "DESTINATION-TOPIC", "DESTINATION-PARTITION",
          "DESTINATION-OFFSET", "PRECISION", "COPIED")


class NoMatchingGroupError(KMirrorError):
    """No consumer group at the source matches ``--groups``."""

    def __init__(self, pattern: str):
        super().__init__(f"no consumer group at the source matches --groups {pattern!r} (a whole-name match)")
        self.pattern = pattern


def add_arguments(parser: argparse.ArgumentParser) -> None:
    options.add_arguments(parser, shown=_SHOWN, help=_HELP)
    parser.add_argument("--apply", action="store_true",
                        help="commit the translated offsets to the groups at the destination (groups with members "
                             "there are left alone; no offset moves backwards) and print what was committed")


@dataclass(frozen=True)
class TranslationRow:
    """One line of the table: a group's source partition and one destination partition it feeds."""

    group: str
    source: TopicPartition
    source_offset: int
    destination: TopicPartition | None
    """None: the group's offset there is not translated."""
    translation: Translation | None
    copied: bool
    """The mirror has copied the source partition up to ``source_offset``."""


def destinations_of(entries: Iterable[SyncEntry]) -> dict[TopicPartition, frozenset[TopicPartition]]:
    """Source partition -> the destination partitions its records went to."""
    out: dict[TopicPartition, set[TopicPartition]] = {}
    for entry in entries:
        out.setdefault(entry.source, set()).add(entry.destination)
    return {source: frozenset(destinations) for source, destinations in out.items()}


def rows(translation: GroupTranslation, destinations: Mapping[TopicPartition, frozenset[TopicPartition]],
         frontier: Mapping[TopicPartition, int]) -> list[TranslationRow]:
    """The table's lines for one group, by source partition then destination partition
    (``destinations``: :func:`destinations_of`; ``frontier``: :func:`~.engine.copied.copy_frontier`)."""
    out = []
    for source, offset in sorted(translation.source_offsets.items()):
        copied = offset <= frontier.get(source, -1)
        targets = sorted(d for d in destinations.get(source, ()) if d in translation.translated)
        out.extend(TranslationRow(translation.group, source, offset, d, translation.translated[d], copied)
                   for d in targets)
        if not targets:
            out.append(TranslationRow(translation.group, source, offset, None, None, copied))
    return out


def table(lines: Iterable[TranslationRow]) -> str:
    """``lines`` under :data:`HEADER`, in columns two spaces apart."""
    return columns([HEADER, *(_cells(line) for line in lines)])


def _cells(line: TranslationRow) -> tuple[str, ...]:
    there = (("-", "-", "-", "-") if line.destination is None or line.translation is None else
             (line.destination.topic, str(line.destination.partition), str(line.translation.offset),
              line.translation.precision.value))
    return (line.group, line.source.topic, str(line.source.partition), str(line.source_offset), *there,
            "yes" if line.copied else "no")


def _note(translation: GroupTranslation, applied: dict[TopicPartition, int] | None) -> str | None:
    """What happened to a group beyond its rows (``applied``: its commit, under --apply)."""
    group, there = translation.group, translation.destination
    if not translation.source_offsets:
        return f"group {group}: no committed offset at the source on a mirrored topic; nothing to translate"
    if not translation.translated:
        return f"group {group}: no partition translated; nothing to commit" if applied is not None else None
    if there is not None and there.active:
        what = "left alone" if applied is not None else "--apply leaves it alone"
        return (f"group {group}: {what}: it is active at the destination ({_count(there.members, 'member')}, "
                f"{there.state}); its consumers own its offsets there")
    if applied is None:
        return None
    unchanged = len(translation.translated) - len(applied)
    kept = f"{_count(unchanged, 'partition')} already at or past the translated offset, unchanged" if unchanged else ""
    if not applied:
        return f"group {group}: nothing committed: {kept}"
    done = ", ".join(f"{tp}={offset}" for tp, offset in sorted(applied.items()))
    return f"group {group}: committed at the destination {done}" + (f" ({kept})" if kept else "")


def _count(n: int, thing: str) -> str:
    return f"{n} {thing}" + ("" if n == 1 else "s")


def run(args: argparse.Namespace) -> int:
    from .engine.copied import NoOffsetSyncsError
    from .kafka import AuthenticationError, ClusterUnreachableError

    config = options.config_from_args(args)
    if config is None:
        return EXIT_UNUSABLE
    if config.sync.groups is None:
        log.error("groups translate needs --groups REGEX (or [sync] groups in the --config file)")
        return EXIT_UNUSABLE
    try:
        translate_groups(config, config.sync.groups, apply=args.apply)
    except KMirrorError as exc:
        unusable = (ClusterUnreachableError, AuthenticationError, NoOffsetSyncsError, NoMatchingGroupError)
        return exit_code(exc, unusable, "groups translate failed")
    return 0


def translate_groups(config: MirrorConfig, pattern: str, *, apply: bool) -> None:
    """Print the rows of every group matching ``pattern``, then what happened to each group;
    commit under ``apply``."""
    from .engine import OffsetSyncStore, client_for, offset_syncs_topic, open_transaction_wait_s
    from .engine.copied import copied_state
    from .engine.group_sync import GroupOffsetSync
    from .engine.own_topics import mirrored

    source = client_for(config.clusters.source, config.limits.retry)
    destination = client_for(config.clusters.destination, config.limits.retry)
    syncs = OffsetSyncStore(destination, offset_syncs_topic(config.job_name),
                            max_wait_s=open_transaction_wait_s(config.delivery.transaction_timeout_s))
    sync = GroupOffsetSync(pattern, source, destination, syncs,
                           interval_s=config.sync.group_offsets_interval_s,
                           mirrored=functools.partial(mirrored, config))
    groups = sync.groups()
    if not groups:
        raise NoMatchingGroupError(pattern)
    state = copied_state(destination, config.job_name, syncs,
                         max_wait_s=open_transaction_wait_s(config.delivery.transaction_timeout_s))
    entries, frontier = state.entries, state.frontier
    topic_ids, destination_ids = sync.topic_ids(), sync.destination_ids()
    translations = [sync.translate(group, frontier, topic_ids, destination_ids) for group in groups]
    destinations = destinations_of(entries)
    lines = [line for translation in translations for line in rows(translation, destinations, frontier)]
    if lines:
        print(table(lines), flush=True)
    for translation in translations:
        note = _note(translation, sync.commit(translation) if apply else None)
        if note:
            print(note, flush=True)
