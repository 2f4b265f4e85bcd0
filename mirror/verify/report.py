"""What ``kmirror verify`` found, per topic pair, and which of it fails the mirror.

A pair's report says how much was compared against what a consumer of the destination reads
there (``compared N of M``), and each finding with its partition, count and first offset.
Which findings fail depends on the job's delivery mode and on who owns the destination topic
(:func:`failures`): records another producer wrote (``foreign``) fail on a topic kmirror
created, where nothing but the copy should write, and are only reported on one it found.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass

from ..columns import columns

__all__ = ["KINDS", "FAILURES", "FOREIGN", "Finding", "PairReport", "failures", "report_text", "report_json"]

KINDS = {
    "missing": "at the source, not at the destination",
    "duplicated": "at the destination more often than at the source",
    "altered": "at the destination with a key, value, header or timestamp the source record does not have",
    "misplaced": "in another destination partition than the pair's partitioning puts it in",
    "reordered": "before a record that preceded it at the source (same key and source partition)",
    "foreign": "written into the destination by another producer than the job's copies: consumers read it, the "
               "source has no such record",
    "foreign-duplicate": "written into the destination by another producer, equal to a source record the copy "
                         "wrote too: consumers read that record twice",
    "gone": "no longer at the source (retention or compaction since the copy); not a failure",
    "cleaned": "no longer at the destination (its retention or compaction); not a failure",
}
"""Each kind of finding and what it means, as the report explains it."""
FAILURES = frozenset({"missing", "duplicated", "altered", "misplaced", "reordered"})
"""The kinds that fail every mirror (``duplicated`` not under at-least-once)."""
FOREIGN = frozenset({"foreign", "foreign-duplicate"})
"""The kinds that fail a mirror into a topic kmirror created, or under ``--strict``."""


@dataclass(frozen=True)
class Finding:
    kind: str
    """A key of :data:`KINDS`."""
    topic: str
    partition: int
    count: int
    first_offset: int
    """The first offending offset of ``topic`` (the source's for missing and cleaned records,
    the destination's for the others)."""


@dataclass(frozen=True)
class PairReport:
    source_topic: str
    destination_topic: str
    source_records: int
    """Source records compared: the ranges the job's offset syncs describe, up to its last commit."""
    destination_records: int
    """Destination records compared: those the copy wrote there for the source records compared."""
    findings: tuple[Finding, ...]
    destination_total: int = 0
    """The records a read_committed consumer reads in every partition of the destination topic,
    from its log start to its end when verify began: the compared ones, the foreign ones, and
    the rest, which verify did not cover (:attr:`not_covered`)."""
    created: bool | None = None
    """kmirror created the destination topic (its provenance says so); False: it found it there."""
    topic_id: str | None = None
    """The id of the source topic compared (None: not known)."""
    earlier_ids: tuple[str, ...] = ()
    """Ids of earlier source topics of the name, deleted since, whose copies were not compared."""
    lost_ids: tuple[str, ...] = ()
    """Ids of destination topics of the name lost since, the copies into which were not compared."""

    @property
    def foreign(self) -> int:
        return sum(f.count for f in self.findings if f.kind in FOREIGN)

    @property
    def not_covered(self) -> int:
        """Destination records verify read no source for: before the oldest offset sync kept
        (or ``--from-time``), after the job's last commit, or written by the job's producers
        where no sync of the verified range places them (a retried at-least-once batch)."""
        return max(0, self.destination_total - self.destination_records - self.foreign)

    @property
    def failures(self) -> tuple[Finding, ...]:
        """The findings that fail whatever the mode and the topic's owner (see :func:`failures`)."""
        return tuple(f for f in self.findings if f.kind in FAILURES)


def failures(reports: list[PairReport], *, at_least_once: bool, strict: bool = False) -> list[Finding]:
    """The findings that fail the mirror: duplicates do not under at-least-once (that mode's
    promise allows them); foreign records do on a topic kmirror created, and under ``strict``.
    Under at-least-once a foreign duplicate is a duplicate too: a copier that died before it
    wrote its first offset syncs leaves records written by a producer no sync names, and
    verify cannot tell them from another application's copies."""
    allowed = {"duplicated", "foreign-duplicate"} if at_least_once else set()
    return [f for report in reports for f in report.findings if f.kind not in allowed
            and (f.kind in FAILURES or (f.kind in FOREIGN and (strict or report.created is not False)))]


def _verdict(report: PairReport, *, at_least_once: bool, strict: bool) -> str:
    counts = {kind: sum(f.count for f in report.findings if f.kind == kind) for kind in KINDS}
    found = ", ".join(f"{kind} {count:,}" for kind, count in counts.items() if count)
    failed = failures([report], at_least_once=at_least_once, strict=strict)
    if failed:
        verdict = f"FAILED: {found}"
    elif report.foreign:
        verdict = (f"{found}; foreign records reported, not failed: kmirror found {report.destination_topic} "
                   "there, and other producers may be expected to write it (--strict fails them)")
    else:
        verdict = f"exact{f' ({found})' if found else ''}"
    return f"{verdict}; compared {report.destination_records:,} of {report.destination_total:,}"


def report_text(reports: list[PairReport], *, at_least_once: bool = False, strict: bool = False) -> str:
    """A row per pair (its verdict, and how much of the destination it covers), then a row per finding."""
    pairs = [("PAIR", "SOURCE-RECORDS", "DESTINATION-RECORDS", "VERDICT")]
    for report in reports:
        pairs.append((f"{report.source_topic} -> {report.destination_topic}", f"{report.source_records:,}",
                      f"{report.destination_total:,}", _verdict(report, at_least_once=at_least_once, strict=strict)))
    text = columns(pairs)
    remade = [r for r in reports if r.earlier_ids]
    if remade:
        text += "\n\n" + "\n".join(
            f"{r.source_topic}: compared the topic of id {r.topic_id}, the one the source has now; the copies of "
            f"{', '.join(r.earlier_ids)} (deleted at the source, and made again) have no source to compare with, and "
            f"are among the records not covered" for r in remade)
    lost = [r for r in reports if r.lost_ids]
    if lost:
        text += "\n\n" + "\n".join(
            f"{r.destination_topic}: the copies into {', '.join(r.lost_ids)} (a destination topic of the name, deleted "
            f"since) are gone with it, and were not compared" for r in lost)
    uncovered = [r for r in reports if r.not_covered]
    if uncovered:
        text += "\n\n" + "\n".join(
            f"{r.destination_topic}: {r.not_covered:,} records not covered (before the oldest offset sync kept or "
            "--from-time, after the job's last commit, or retried by an at-least-once copy): not compared"
            for r in uncovered)
    found = [f for report in reports for f in report.findings]
    if found:
        rows = [("KIND", "PARTITION", "RECORDS", "FIRST-OFFSET", "MEANING")]
        rows += [(f.kind, f"{f.topic}-{f.partition}", str(f.count), str(f.first_offset), KINDS[f.kind]) for f in found]
        text += "\n\n" + columns(rows)
    return text


def report_json(reports: list[PairReport]) -> list[dict]:
    """The reports as JSON values: every field, and the counts derived from them."""
    return [{**asdict(report), "foreign": report.foreign, "not_covered": report.not_covered,
             "findings": [asdict(f) for f in report.findings]} for report in reports]
