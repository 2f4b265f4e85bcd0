"""Batches, records and source bytes per routing class: the "how much did we avoid decompressing" numbers.

Each task counts its own batches; the driver merges the tasks' counters. Both are plain
dataclasses, so they pickle (Spark ``collect()``), and :meth:`RouteCounters.as_dict` gives
the JSON shape logged per micro-batch.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field

from .policy import RouteClass
from .router import Routed

__all__ = ["ClassCounts", "RouteCounters"]


@dataclass
class ClassCounts:
    """Source-side totals of one routing class."""

    batches: int = 0
    records: int = 0
    bytes: int = 0


def _one_per_class() -> dict[RouteClass, ClassCounts]:
    return {route: ClassCounts() for route in RouteClass}


@dataclass
class RouteCounters:
    """One :class:`ClassCounts` per :class:`RouteClass`, always all of them (zeros included)."""

    by_class: dict[RouteClass, ClassCounts] = field(default_factory=_one_per_class)

    def add(self, routed: Routed) -> None:
        """Count one routed source batch."""
        self.count(routed.route, routed.records, routed.source_bytes)

    def count(self, route: RouteClass, records: int, source_bytes: int, batches: int = 1) -> None:
        """Count source batches of ``route`` (one by default), without a :class:`Routed` (the
        copy engine forwards most batches without building one, a run of them at a time)."""
        counts = self.by_class[route]
        counts.batches += batches
        counts.records += records
        counts.bytes += source_bytes

    def take(self) -> "RouteCounters":
        """What was counted, handed over: these counters start again from zero, in place, so
        whoever counts into them (a fetched set being routed) goes on counting here."""
        taken = RouteCounters(self.by_class)
        self.by_class = _one_per_class()
        return taken

    def merge(self, other: RouteCounters) -> None:
        """Add ``other``'s counts (another task's) into these."""
        for route, theirs in other.by_class.items():
            mine = self.by_class[route]
            mine.batches += theirs.batches
            mine.records += theirs.records
            mine.bytes += theirs.bytes

    @property
    def total_records(self) -> int:
        """Source records read, dropped and aborted ones included."""
        return sum(counts.records for counts in self.by_class.values())

    @property
    def total_bytes(self) -> int:
        """Source bytes read, dropped and aborted batches included."""
        return sum(counts.bytes for counts in self.by_class.values())

    def as_dict(self) -> dict[str, dict[str, int]]:
        """``{"passed-through": {"batches": .., "records": .., "bytes": ..}, ...}`` in class order."""
        return {route.value: asdict(counts) for route, counts in self.by_class.items()}
